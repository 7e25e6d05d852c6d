"""Fake backends for the registry and target tests: entry points point at these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from luminal.compiler.backends.protocol import Built, Capabilities, Executable
from luminal.compiler.hardware import Device
from luminal.compiler.ir import interpreter


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

    def codegen(self, sched: Any, options: Any, device: Device | None) -> Mapping[str, str]:
        return {"kernels.txt": "\n".join(k.name for k in sched.kernels)}

    def compile(self, sched: Any, options: Any, device: Device | None) -> Built:
        self.compiled_for.append(device)
        return Built(
            {"kind": self.kind, "backend": self.name, "arch": f"{self.kind}-1"},
            {"kernels.txt": self.codegen(sched, options, device)["kernels.txt"].encode()},
            {"kernels": len(sched.kernels)},
        )

    def load(self, manifest: Mapping[str, Any], members: Mapping[str, bytes]) -> Executable:
        raise NotImplementedError  # set per test

    def time(self, exe: Executable, feeds: Mapping[str, np.ndarray], repeats: int) -> list[float]:
        return [0.0] * repeats


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

    def codegen(self, sched: Any, options: Any, device: Device | None) -> Mapping[str, str]:
        return {}

    def compile(self, sched: Any, options: Any, device: Device | None) -> Built:
        raise ValueError("no")

    def load(self, manifest: Mapping[str, Any], members: Mapping[str, bytes]) -> Executable:
        raise ValueError("no")

    def time(self, exe: Executable, feeds: Mapping[str, np.ndarray], repeats: int) -> list[float]:
        return []


NOT_A_BACKEND = object()
