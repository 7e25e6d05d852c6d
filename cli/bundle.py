"""`luminal bundle`: an offline, signed install bundle for an air-gapped machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from luminal.cli.options import JsonOption
from luminal.installers.bundle import EXTRAS, BundleSpec, build_bundle


def bundle_cmd(
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="A new folder, or a path ending in .tar.gz."),
    ],
    signing_key: Annotated[
        Path,
        typer.Option(
            "--signing-key",
            "-k",
            help="The vendor signing key (PEM) that signs SHA256SUMS; its root certificate "
            "PREFIX.cert.json must lie beside it.",
        ),
    ],
    platform: Annotated[
        str, typer.Option(help="Target wheel platform (older manylinux wheels are taken too).")
    ] = "manylinux_2_28_x86_64",
    python: Annotated[str, typer.Option(help="Target Python version.")] = "3.11",
    extras: Annotated[
        str | None,
        typer.Option(help=f"Comma-separated extras to include: {', '.join(EXTRAS)}."),
    ] = None,
    wheelhouse: Annotated[
        Path | None,
        typer.Option(help="Resolve from this folder of wheels only (no package index)."),
    ] = None,
    source: Annotated[
        Path | None, typer.Option(help="luminal's source tree (default: this checkout).")
    ] = None,
    luminal_wheel: Annotated[
        Path | None, typer.Option(help="A luminal wheel already built (instead of --source).")
    ] = None,
    constraint: Annotated[
        Path | None,
        typer.Option(help="pip constraints file, e.g. to pin a CPU build of torch."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Gather wheels for luminal and every dependency, a hash lock, a CycloneDX SBOM,
    SHA256SUMS signed (DSSE) by a vendor signing key, and install.sh.

    On the air-gapped machine, `./install.sh --prefix /opt/luminal` verifies the
    signature and every sum before installing anything, installs with
    pip --no-index --require-hashes, then runs `luminal doctor`.  A signing key whose
    certificate does not verify against this release's vendor roots: exit 4.

    Examples:

      luminal bundle -o luminal-bundle.tar.gz -k keys/vendor-2025.key

      luminal bundle -o bundle/ -k vendor.key --extras torch --constraint cpu-torch.txt

      luminal bundle -o bundle/ -k vendor.key --wheelhouse wheels/   # no index at all
    """
    console = Console(stderr=True, quiet=as_json, highlight=False)
    spec = BundleSpec(
        output=output,
        signing_key=signing_key,
        platform=platform,
        python=python,
        extras=tuple(e.strip() for e in (extras or "").split(",") if e.strip()),
        wheelhouse=wheelhouse,
        source=source,
        luminal_wheel=luminal_wheel,
        constraint=constraint,
    )
    result = build_bundle(spec, progress=lambda line: console.print(f"  [green]✓[/] {line}"))
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
        return
    typer.echo(
        f"{result.path}: {len(result.wheels)} wheels, {result.bytes / 2**20:.1f} MiB; "
        f"SHA256SUMS signed by {result.signer} (certified by root {result.root}); "
        f"install with: ./install.sh --prefix /opt/luminal"
    )
