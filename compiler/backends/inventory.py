"""What `luminal devices` shows: every device found, the target that compiles for it,
and every target known, whether it can load, and why not.

Devices come from two places: each loadable backend's own `discover()` (so a plugin's
accelerator appears under its own kind and name), and the machine-wide discovery in
`compiler/hardware` (so a GPU whose backend is not installed is still listed, with no
target).  A device both report (same PCI address, or same kind and index) is shown once.
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.compiler.backends.registry import Registry
from luminal.compiler.backends.target import devices_of
from luminal.compiler.hardware.device import Device
from luminal.compiler.hardware.machine import discover
from luminal.compiler.hardware.probe import Probe
from luminal.errors import UsageError

_KIND_ORDER = {"cpu": 0, "cuda": 1, "rocm": 2, "accelerator": 9}


@dataclass(frozen=True)
class Listed:
    device: Device
    target: str | None  # the --target that compiles for it; None: no backend for it here


@dataclass(frozen=True)
class TargetInfo:
    name: str
    origin: str  # "built-in" or "plugin <distribution> <version>"
    kind: str | None  # None when the backend cannot load
    priority: int | None
    devices: int
    problem: str | None  # why it cannot load, or why its discovery failed


@dataclass(frozen=True)
class Inventory:
    devices: tuple[Listed, ...]
    targets: tuple[TargetInfo, ...]
    notes: tuple[str, ...]


def inventory(registry: Registry | None = None, probe: Probe | None = None) -> Inventory:
    registry = registry or Registry.installed()
    probe = probe or Probe.from_env()
    listed: list[Listed] = []
    targets: list[TargetInfo] = []
    seen: set[tuple[str, ...]] = set()
    for name in registry.names():
        origin = registry.entry(name).origin
        try:
            backend = registry.get(name)
        except UsageError as err:
            targets.append(TargetInfo(name, origin, None, None, 0, str(err)))
            continue
        devices, problem = devices_of(backend)
        targets.append(
            TargetInfo(name, origin, backend.kind, backend.priority, len(devices), problem)
        )
        for d in devices:
            listed.append(Listed(d, name))
            seen.add(_key(d))
    for d in discover(probe):
        if _key(d) not in seen:
            listed.append(Listed(d, None))
            seen.add(_key(d))
    listed.sort(key=lambda r: (_KIND_ORDER.get(r.device.kind, 5), r.device.kind, r.device.index))
    return Inventory(tuple(listed), tuple(targets), tuple(registry.problems()))


def _key(d: Device) -> tuple[str, ...]:
    return ("pci", d.bus_id) if d.bus_id else (d.kind, str(d.index))
