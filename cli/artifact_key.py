"""`luminal artifact-key ...`: which installs' artifacts this install runs.

Every install signs the artifacts it compiles with its own key, and runs only artifacts
signed by a key it trusts: its own, plus keys added here.  To run artifacts built on a
build server: `luminal artifact-key export -o build.key.json` there, copy the file, and
`luminal artifact-key trust build.key.json` here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from luminal.cli.options import JsonOption
from luminal.compiler.artifact.trust import TrustStore, own_key, read_key_file
from luminal.errors import UsageError
from luminal.licensing.home import write_atomic

artifact_key_app = typer.Typer(
    help="Keys whose signed artifacts this install runs: export, trust, list, untrust.",
    no_args_is_help=True,
)


@artifact_key_app.command("export")
def export_cmd(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the key file here (default: stdout)."),
    ] = None,
) -> None:
    """Print (or write) this install's public artifact-signing key as a key file.

    Give the file to the installs that should run artifacts built here; they add it with
    `luminal artifact-key trust FILE`.  It holds no secret.

    Examples:

      luminal artifact-key export -o build-server.key.json
    """
    data = (json.dumps(own_key().to_json(), indent=2) + "\n").encode()
    if output is None:
        typer.echo(data.decode(), nl=False)
        return
    try:
        write_atomic(output, data, mode=0o644)
    except OSError as err:
        raise UsageError(f"{output}: cannot write ({err.strerror})") from None
    typer.echo(f"wrote key {own_key().keyid} to {output}")


@artifact_key_app.command("trust")
def trust_cmd(
    key_file: Annotated[
        Path, typer.Argument(help="A key file from `luminal artifact-key export`.")
    ],
) -> None:
    """Run artifacts signed by this key from now on.

    Examples:

      luminal artifact-key trust build-server.key.json
    """
    key = read_key_file(key_file)
    store, added = TrustStore.load().trust(key)
    host = f" (from {key.host})" if key.host else ""
    if added:
        typer.echo(f"trusted artifact key {key.keyid}{host}; listed in {store.path}")
    else:
        typer.echo(f"artifact key {key.keyid}{host} is already trusted")


@artifact_key_app.command("untrust")
def untrust_cmd(
    keyid: Annotated[str, typer.Argument(help="The key id, as `luminal artifact-key list` shows.")],
) -> None:
    """Stop running artifacts signed by this key (this install's own key stays trusted)."""
    store = TrustStore.load().untrust(keyid)
    typer.echo(f"artifact key {keyid} is no longer trusted ({store.path})")


@artifact_key_app.command("list")
def list_cmd(as_json: JsonOption = False) -> None:
    """List the keys whose artifacts this install runs: its own, then those added."""
    store = TrustStore.load()
    rows = []
    if store.own is not None:
        rows.append({"keyid": store.own.keyid, "source": "this install", "host": store.own.host})
    for k in store.added:
        rows.append({"keyid": k.keyid, "source": f"added {k.added_at}", "host": k.host})
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo("no keys: this install has not compiled anything and trusts no other key")
    for r in rows:
        typer.echo(f"{r['keyid']}  {r['source']}" + (f"  ({r['host']})" if r["host"] else ""))
