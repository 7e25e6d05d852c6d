"""`luminal devices`: the hardware luminal can compile for on this machine."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.options import JsonOption
from luminal.compiler.hardware import detect_cpu


def devices_cmd(as_json: JsonOption = False) -> None:
    """List the devices found on this machine (today: the CPU and its SIMD features).

    Examples:

      luminal devices

      luminal devices --json
    """
    cpu = detect_cpu()
    if as_json:
        typer.echo(json.dumps({"devices": [{"kind": "cpu", **cpu.to_json()}]}, indent=2))
        return
    table = Table(title="Devices", title_justify="left")
    for col in ("kind", "name", "cores", "memory", "features", "fingerprint"):
        table.add_column(col)
    memory = f"{cpu.memory_bytes / 2**30:.1f} GiB" if cpu.memory_bytes else "?"
    table.add_row(
        "cpu",
        f"{cpu.model} ({cpu.arch})",
        str(cpu.logical_cores),
        memory,
        " ".join(cpu.simd) or "-",
        cpu.fingerprint,
    )
    Console().print(table)
