"""The backend protocol: what every target (built-in or plugin) provides.

A backend turns a backend-neutral `Schedule` into artifact members for one kind of
device, and later turns those members back into something that runs:

    discover() -> devices of this kind on this machine (none is normal, never an error)
    capabilities(device) -> what it can run (dtypes, kernel kinds), for error messages
    codegen(schedule, options, device) -> generated source text, by member name
    compile(schedule, options, device) -> Built: the target record and every member
    load(manifest, members) -> Executable (raises ArtifactIncompatible without the device)
    time(executable, feeds, repeats) -> seconds per run

Built-in backends and those named by Python entry points in the group
`luminal.backends` share one registry (`luminal.compiler.backends.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from luminal.compiler.hardware.device import Device

if TYPE_CHECKING:
    from luminal.compiler.ir import TensorSpec
    from luminal.compiler.pipeline import CompileOptions
    from luminal.compiler.schedule import Schedule

ENTRY_POINT_GROUP = "luminal.backends"


@dataclass(frozen=True)
class Capabilities:
    dtypes: tuple[str, ...]  # DType values it computes in
    kernel_kinds: tuple[str, ...]  # schedule kernel kinds it generates code for
    needs_device_to_compile: bool = False  # False: codegen works on any machine


@dataclass(frozen=True)
class Built:
    """What `compile` returns: `target` becomes the manifest's "target" record (it must
    hold "kind" and "backend"); `members` are stored beside manifest.json."""

    target: Mapping[str, Any]
    members: Mapping[str, bytes]
    notes: Mapping[str, Any] = field(default_factory=dict)  # shown by `luminal compile`


@runtime_checkable
class Executable(Protocol):
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


@runtime_checkable
class Backend(Protocol):
    name: str  # the --target value: "cpu", "cuda", "rocm", or the plugin's name
    kind: str  # Device.kind it serves
    priority: int  # --target auto picks the present backend with the highest priority

    def discover(self) -> Sequence[Device]: ...

    def capabilities(self, device: Device | None) -> Capabilities: ...

    def codegen(
        self, sched: Schedule, options: CompileOptions, device: Device | None
    ) -> Mapping[str, str]: ...

    def compile(self, sched: Schedule, options: CompileOptions, device: Device | None) -> Built: ...

    def load(self, manifest: Mapping[str, Any], members: Mapping[str, bytes]) -> Executable: ...

    def time(
        self, exe: Executable, feeds: Mapping[str, np.ndarray], repeats: int
    ) -> list[float]: ...
