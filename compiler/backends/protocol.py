"""The backend protocol: what every target (built-in or plugin) provides.

A backend supplies the target-specific stages of the one pipeline (`compiler/pipeline.py`)
and nothing else; the pipeline runs them in the same order for every target:

    discover() -> devices of this kind on this machine (none is normal, never an error)
    capabilities(device) -> what it can run (dtypes, kernel kinds), for error messages
    tuner(request) -> a `Tuner` (search/tuner.py): candidate variants per kernel, a cost
        model and a bench that times them; None when it has nothing to tune
    codegen(request) -> generated source text, by artifact member name
    build(request, sources) -> Built: the target record and every artifact member
    load(manifest, members) -> Executable (ArtifactIncompatible without the device); the
        pipeline's whole-model check runs what `build` produced through it, so a backend
        is checked against the reference interpreter before its artifact is written

A backend may also offer `profiled(request) -> TimedModel` (`Profiling`): the same
model built with a timer around every kernel, for `luminal profile`; one without it
cannot profile, and the profiler says so.

A `Request` is what the pipeline asks for: the schedule, the options, the device (None
when compiling without it) and the variant the search chose for each kernel.

Built-in backends and those named by Python entry points in the group
`luminal.backends` share one registry (`luminal.compiler.backends.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from luminal.compiler.hardware.device import Device
from luminal.compiler.options import CompileOptions
from luminal.compiler.schedule import Schedule
from luminal.compiler.schedule.variant import Variant

if TYPE_CHECKING:
    from luminal.compiler.artifact.manifest import Manifest
    from luminal.compiler.ir import TensorSpec
    from luminal.compiler.search.tuner import Tuner

ENTRY_POINT_GROUP = "luminal.backends"


@dataclass(frozen=True)
class Capabilities:
    dtypes: tuple[str, ...]  # DType values it computes in
    kernel_kinds: tuple[str, ...]  # schedule kernel kinds it generates code for
    needs_device_to_compile: bool = False  # False: codegen works on any machine


@dataclass(frozen=True)
class Request:
    """What the pipeline asks a backend to tune, generate and build."""

    sched: Schedule
    options: CompileOptions = field(default_factory=CompileOptions)
    device: Device | None = None
    variants: Mapping[str, Variant] = field(default_factory=dict)  # kernel name -> choice


@dataclass(frozen=True)
class Built:
    """What `build` returns: `target` becomes the manifest's "target" record (it must
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

    def tuner(self, request: Request) -> Tuner | None: ...

    def codegen(self, request: Request) -> Mapping[str, str]: ...

    def build(self, request: Request, sources: Mapping[str, str]) -> Built: ...

    def load(self, manifest: Manifest, members: Mapping[str, bytes]) -> Executable: ...


@runtime_checkable
class TimedModel(Protocol):
    """A model built with per-kernel timers: seconds summed per kernel of the schedule,
    in schedule order, since the last `reset_timers`."""

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def kernel_seconds(self) -> list[float]: ...

    def reset_timers(self) -> None: ...


@runtime_checkable
class Profiling(Protocol):
    """What a backend that can time its kernels adds to `Backend`."""

    def profiled(self, request: Request) -> TimedModel: ...
