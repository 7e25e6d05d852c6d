"""`luminal devices`: the hardware luminal can compile for on this machine."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.options import JsonOption
from luminal.compiler.backends.inventory import Inventory, Listed, inventory


def devices_cmd(as_json: JsonOption = False) -> None:
    """List the devices found on this machine and the target (`--target`) for each.

    The CPU, NVIDIA GPUs (NVML or nvidia-smi), AMD GPUs (amdsmi, rocm-smi or sysfs) and
    accelerators on the PCI bus; plugins installed for the `luminal.backends` entry
    point add their own.  Set LUMINAL_HARDWARE_ROOT to look at a recorded machine.

    Examples:

      luminal devices

      luminal devices --json
    """
    inv = inventory()
    if as_json:
        typer.echo(json.dumps(to_json(inv), indent=2))
        return
    console = Console()
    table = Table(title="Devices", title_justify="left")
    for col in ("target", "kind", "name", "arch", "memory", "details"):
        table.add_column(col)
    features = ""
    for row in inv.devices:
        d = row.device
        memory = f"{d.memory_bytes / 2**30:.1f} GiB" if d.memory_bytes else "-"
        if d.kind == "cpu":
            simd = str(d.details.get("features", "")).split()
            details = f"{d.details.get('logical_cores', '?')} cores, {len(simd)} SIMD features"
            features = f"cpu features: {' '.join(simd) or '-'}"
        else:
            details = f"{d.bus_id or '?'} via {d.source}; driver {d.driver or '?'}"
        table.add_row(row.target or "-", d.kind, d.name, d.arch, memory, details)
    console.print(table)
    if features:
        console.print(features, highlight=False)
    for t in inv.targets:
        state = f"{t.devices} device(s)" if t.problem is None else f"[yellow]{t.problem}[/]"
        console.print(f"target [bold]{t.name}[/] ({t.origin}): {state}", highlight=False)
    for note in inv.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def to_json(inv: Inventory) -> dict[str, Any]:
    return {
        "devices": [_device(row) for row in inv.devices],
        "targets": [
            {
                "name": t.name,
                "origin": t.origin,
                "kind": t.kind,
                "priority": t.priority,
                "devices": t.devices,
                "problem": t.problem,
            }
            for t in inv.targets
        ],
        "notes": list(inv.notes),
    }


def _device(row: Listed) -> dict[str, Any]:
    data: dict[str, Any] = {**row.device.to_json(), "target": row.target}
    if row.device.kind == "cpu":
        data["logical_cores"] = int(row.device.details.get("logical_cores", "1"))
        data["simd"] = str(row.device.details.get("features", "")).split()
    return data
