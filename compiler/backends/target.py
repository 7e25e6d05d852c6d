"""`--target`: which backend compiles a model, and for which device.

    auto        every loadable backend discovers its devices; the present one with the
                highest priority wins (cuda 30, rocm 20, a plugin its own, cpu 0)
    cpu, cuda, rocm, NAME
                that backend; without its device here it still compiles (code
                generation needs no device) unless the backend says it needs one
    KIND:NAME   a plugin by the name licenses use ("asic:systolic")

A name no backend answers to, a backend that fails to load, or an absent device that
a backend needs is a one-line UsageError.  Discovery errors inside a plugin are the
plugin's problem: they count as "no device", with a note, never as a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from luminal.compiler.backends.protocol import Backend
from luminal.compiler.backends.registry import Registry
from luminal.compiler.hardware import amd, nvidia
from luminal.compiler.hardware.device import Device
from luminal.compiler.hardware.probe import Probe
from luminal.errors import LuminalError, UsageError, one_line

AUTO = "auto"
#: Kinds whose license target is the kind itself; every other backend is "KIND:NAME".
BUILTIN_KINDS = ("cpu", "cuda", "rocm")
#: For a GPU backend that cannot load (Triton not installed), whether its GPU is here:
#: only then is its absence worth a note.
_GPU_DISCOVERY = {"cuda": nvidia.discover, "rocm": amd.discover}


@dataclass(frozen=True)
class Target:
    backend: Backend
    device: Device | None  # None: compiling without the device (code generation only)
    notes: tuple[str, ...] = ()  # what the user should know about the choice

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def license_target(self) -> str:
        """The target as licenses name it: "cpu", "cuda", "rocm" or "asic:NAME"."""
        return license_name(self.backend)


def license_name(backend: Backend) -> str:
    if backend.kind in BUILTIN_KINDS or backend.kind == backend.name:
        return backend.name
    return f"{backend.kind}:{backend.name}"


def resolve(name: str, registry: Registry | None = None) -> Target:
    registry = registry or Registry.installed()
    if name == AUTO:
        return _auto(registry)
    backend = registry.get(_plain(name, registry))
    devices, note = devices_of(backend)
    if devices:
        return Target(backend, devices[0], (note,) if note else ())
    if backend.capabilities(None).needs_device_to_compile:
        raise UsageError(
            f"target '{backend.name}': no {backend.kind} device on this machine, and this "
            "backend needs one to compile (`luminal devices` lists what is here)"
        )
    return Target(
        backend,
        None,
        (
            f"no {backend.kind} device here: generating code for '{backend.name}' without one; "
            "the artifact runs only where such a device is",
        ),
    )


def devices_of(backend: Backend) -> tuple[Sequence[Device], str | None]:
    """A backend's devices, or none and why, when its discovery fails."""
    try:
        return tuple(backend.discover()), None
    except LuminalError as err:
        return (), f"{backend.name}: discovery failed: {err}"
    except Exception as err:  # a plugin's bug must not stop a compile for another target
        return (), f"{backend.name}: discovery failed: {one_line(err)}"


def _auto(registry: Registry) -> Target:
    notes: list[str] = []
    candidates: list[tuple[int, str, Backend]] = []
    for name in registry.names():
        try:
            backend = registry.get(name)
        except UsageError as err:
            if name not in _GPU_DISCOVERY or _GPU_DISCOVERY[name](Probe.from_env()):
                notes.append(str(err))  # a plugin that was installed, or a GPU that is here
            continue
        candidates.append((backend.priority, name, backend))
    for _, _, backend in sorted(candidates, key=lambda c: (-c[0], c[1])):
        devices, note = devices_of(backend)
        if note:
            notes.append(note)
        if devices:
            return Target(backend, devices[0], tuple(notes))
    raise UsageError("no target has a device on this machine (not even the CPU backend)")


def _plain(name: str, registry: Registry) -> str:
    """The plain name of a KIND:NAME target (asic:systolic -> systolic)."""
    if name in registry.names() or ":" not in name:
        return name
    kind, _, plain = name.partition(":")
    if plain in registry.names() and registry.get(plain).kind == kind:
        return plain
    return name
