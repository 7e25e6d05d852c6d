"""`luminal tune-db show|export|import|clear`: the search's tuning database.

A fleet shares measurements: export on one machine, import on the others; a compile
there takes the stored winners for kernels measured on the same kind of device.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.options import JsonOption
from luminal.compiler import cache
from luminal.compiler.search.tunedb import TuningDB
from luminal.errors import UsageError

tune_db_app = typer.Typer(no_args_is_help=True)

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db", help="Tuning database (default: $LUMINAL_TUNING_DB or LUMINAL_HOME/tuning.db)."
    ),
]


@tune_db_app.command("show")
def show_cmd(
    db: DbOption = None,
    kernels: Annotated[bool, typer.Option("--kernels", help="List every kernel's winner.")] = False,
    as_json: JsonOption = False,
) -> None:
    """What the database holds, per device and compiler version.

    Examples:

      luminal tune-db show

      luminal tune-db show --kernels --json
    """
    with TuningDB(db) as tdb:
        summary = tdb.summary()
        winners = _winners(tdb) if kernels else []
    if as_json:
        typer.echo(json.dumps({**summary, "winners": winners}, indent=2))
        return
    console = Console()
    table = Table(title=f"Tuning database {summary['path']}", title_justify="left")
    for col in ("device", "compiler", "kernels", "measurements", "latest"):
        table.add_column(col)
    for g in summary["groups"]:  # type: ignore[union-attr]
        table.add_row(
            g["device"], g["compiler"], str(g["kernels"]), str(g["measurements"]), g["latest"]
        )
    console.print(table)
    if kernels:
        wt = Table(title="Winners", title_justify="left")
        for col in ("kernel", "kind", "shape", "variant", "µs", "device"):
            wt.add_column(col)
        for w in winners:
            wt.add_row(
                w["kernel"],
                w["kind"],
                w["shape"],
                w["variant"],
                f"{w['seconds'] * 1e6:.1f}",
                w["device"],
            )
        console.print(wt)


def _winners(tdb: TuningDB) -> list[dict[str, object]]:
    best: dict[tuple[str, str, str], object] = {}
    for m in tdb.measurements():
        key = (m.kernel, m.device, m.compiler)
        if (
            m.ok
            and m.seconds != float("inf")
            and (key not in best or m.seconds < best[key].seconds)
        ):  # type: ignore[attr-defined]
            best[key] = m
    return [
        {
            "kernel": m.kernel,  # type: ignore[attr-defined]
            "kind": m.kind,  # type: ignore[attr-defined]
            "shape": m.shape,  # type: ignore[attr-defined]
            "variant": m.variant.label,  # type: ignore[attr-defined]
            "seconds": m.seconds,  # type: ignore[attr-defined]
            "device": m.device,  # type: ignore[attr-defined]
            "compiler": m.compiler,  # type: ignore[attr-defined]
        }
        for m in best.values()
    ]


@tune_db_app.command("export")
def export_cmd(
    file: Annotated[Path, typer.Argument(help="JSON file to write (atomically).")],
    device: Annotated[str | None, typer.Option(help="Only this device fingerprint.")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write every measurement to a JSON file another install can import.

    Example:

      luminal tune-db export fleet-tuning.json
    """
    with TuningDB(db) as tdb:
        n = tdb.export(file, device)
    _done(as_json, {"exported": n, "file": str(file)}, f"exported {n} measurements to {file}")


@tune_db_app.command("import")
def import_cmd(
    file: Annotated[Path, typer.Argument(help="A file written by `luminal tune-db export`.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Merge an exported file into this database (same kernel, device, compiler and
    variant: the imported timing replaces the local one).

    Example:

      luminal tune-db import fleet-tuning.json
    """
    with TuningDB(db) as tdb:
        n = tdb.import_file(file)
    _done(as_json, {"imported": n, "file": str(file)}, f"imported {n} measurements from {file}")


@tune_db_app.command("clear")
def clear_cmd(
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    device: Annotated[str | None, typer.Option(help="Only this device fingerprint.")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete measurements (all, or one device's) and, for all, the compile cache beside
    the database (rewritten graphs, built libraries); the next compile measures again.

    Without a terminal (a script, CI) it needs --yes (else exit 2); answering no at the
    prompt clears nothing (exit 0).

    Example:

      luminal tune-db clear --yes
    """
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("tune-db clear: no terminal to confirm on; pass --yes")
        if not typer.confirm("Delete the tuning measurements?", default=False):
            _done(as_json, {"cleared": 0}, "nothing cleared")
            return
    with TuningDB(db) as tdb:
        n = tdb.clear(device)
        path = tdb.path
    cached = 0 if device else cache.clear(path)  # rewritten graphs and built libraries
    _done(
        as_json,
        {"cleared": n, "cache_entries_cleared": cached},
        f"cleared {n} measurements and {cached} compile-cache entries",
    )


def _done(as_json: bool, data: dict[str, object], text: str) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(text)
