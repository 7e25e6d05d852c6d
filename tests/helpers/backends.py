"""Fake backends for the registry and target tests: entry points point at these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from luminal.compiler.backends.protocol import Built, Capabilities, Executable, Request
from luminal.compiler.hardware import Device
from luminal.compiler.ir import interpreter
from luminal.errors import ArtifactIncompatible


def device(kind: str, name: str, index: int = 0) -> Device:
    return Device(
        kind=kind, vendor="test", name=name, memory_bytes=1 << 30, arch=f"{kind}-1", index=index
    )


class FakeBackend:
    """A backend whose code is the schedule's graph itself, run by the reference
    interpreter: what goes in must come out, through the artifact and the registry."""

    def __init__(
        self,
        name: str = "fake",
        kind: str = "npu",
        priority: int = 50,
        devices: Sequence[Device] = (),
        needs_device: bool = False,
    ) -> None:
        self.name, self.kind, self.priority = name, kind, priority
        self.devices = tuple(devices)
        self.needs_device = needs_device
        self.compiled_for: list[Device | None] = []

    def discover(self) -> Sequence[Device]:
        return self.devices

    def capabilities(self, device: Device | None) -> Capabilities:
        return Capabilities(("f32",), ("elementwise",), self.needs_device)

    def tuner(self, request: Request) -> None:
        return None

    def codegen(self, request: Request) -> Mapping[str, str]:
        return {"kernels.txt": "\n".join(k.name for k in request.sched.kernels)}

    def build(self, request: Request, sources: Mapping[str, str]) -> Built:
        self.compiled_for.append(request.device)
        return Built(
            {"kind": self.kind, "backend": self.name, "arch": f"{self.kind}-1"},
            {"kernels.txt": sources["kernels.txt"].encode()},
            {"kernels": len(request.sched.kernels)},
        )

    def load(self, manifest: Any, members: Mapping[str, bytes]) -> Executable:
        # Set per test; by default the fake device is never here, so the pipeline's
        # whole-model check is skipped, as for a GPU compiled for without one.
        raise ArtifactIncompatible(f"no {self.kind} device here")


class GraphExecutable:
    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.inputs = tuple(graph.input_specs())
        self.outputs = tuple(graph.output_specs())

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return interpreter.run(self.graph, feeds)


class Broken:
    """Stands for a plugin whose discovery crashes."""

    name, kind, priority = "broken", "npu", 99

    def discover(self) -> Sequence[Device]:
        raise RuntimeError("driver exploded\nwith a second line")

    def capabilities(self, device: Device | None) -> Capabilities:
        return Capabilities(("f32",), (), False)

    def tuner(self, request: Request) -> None:
        return None

    def codegen(self, request: Request) -> Mapping[str, str]:
        return {}

    def build(self, request: Request, sources: Mapping[str, str]) -> Built:
        raise ValueError("no")

    def load(self, manifest: Any, members: Mapping[str, bytes]) -> Executable:
        raise ValueError("no")


NOT_A_BACKEND = object()
