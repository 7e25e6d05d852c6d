"""The `luminal.backends` entry point: SA-128 as a luminal target named "systolic".

Discovery looks for the chip's PCI ids (fake ones: vendor 0xfeed is not assigned to
anyone; only this simulation uses it).  Code generation needs no device, so an artifact
can be built anywhere; loading one needs the device, as it would for real silicon.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from luminal.compiler.backends.protocol import Built, Capabilities, Request
from luminal.compiler.hardware import Device, Probe, scan_pci
from luminal.compiler.ir import TensorSpec
from luminal.errors import ArtifactIncompatible
from luminal_systolic import __version__, isa
from luminal_systolic.lower import lower
from luminal_systolic.simulator import Machine, SimConfig, SimulatorFault, estimate

if TYPE_CHECKING:
    from luminal.compiler.artifact import Manifest

PCI_VENDOR, PCI_DEVICE = 0xFEED, 0x5A01
ARCH = "sa128"
ISA_VERSION = 1
MEMORY_BYTES = 16 << 30  # the card's DRAM


class SystolicBackend:
    name = "systolic"
    kind = "asic"
    priority = 10  # above the CPU, below the GPUs: --target auto prefers a GPU if present

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()

    def discover(self) -> Sequence[Device]:
        found = [
            p
            for p in scan_pci(Probe.from_env())
            if (p.vendor, p.device) == (PCI_VENDOR, PCI_DEVICE)
        ]
        return [
            Device(
                kind=self.kind,
                vendor="luminal reference",
                name="SA-128 systolic array (simulated)",
                memory_bytes=MEMORY_BYTES,
                arch=ARCH,
                driver=p.driver,
                index=i,
                source="pci",
                bus_id=p.address,
                details={"pci_ids": p.ids, "array": f"{isa.TILE}x{isa.TILE}"},
            )
            for i, p in enumerate(found)
        ]

    def capabilities(self, device: Device | None) -> Capabilities:
        return Capabilities(
            dtypes=("f32",),
            kernel_kinds=("contraction", "elementwise"),
            needs_device_to_compile=False,
        )

    def tuner(self, request: Request) -> None:
        return None  # one lowering per kernel: nothing to choose between

    def codegen(self, request: Request) -> Mapping[str, str]:
        return {"program.s": isa.disassemble(lower(request.sched).program)}

    def build(self, request: Request, sources: Mapping[str, str]) -> Built:
        lowered = lower(request.sched)
        cycles = estimate(lowered.program, self.config)
        return Built(
            target={
                "kind": self.kind,
                "backend": self.name,
                "arch": ARCH,
                "isa_version": ISA_VERSION,
                "toolchain": f"luminal-systolic {__version__}",
            },
            members={
                "program.bin": isa.encode(lowered.program),
                "program.s": isa.disassemble(lowered.program).encode(),
                "weights.bin": lowered.weights,
            },
            notes={"instructions": len(lowered.program), **cycles.to_json(self.config)},
        )

    def load(self, manifest: Manifest, members: Mapping[str, bytes]) -> SystolicExecutable:
        target = manifest.target
        if target.get("arch") != ARCH or target.get("isa_version") != ISA_VERSION:
            raise ArtifactIncompatible(
                f"built for {target.get('arch')} ISA {target.get('isa_version')}; this plugin "
                f"runs {ARCH} ISA {ISA_VERSION}; recompile the model"
            )
        if not self.discover():
            raise ArtifactIncompatible(
                f"built for the systolic accelerator ({ARCH}), and there is none on this machine "
                f"(PCI {PCI_VENDOR:04x}:{PCI_DEVICE:04x}; `luminal devices` lists what is here)"
            )
        try:
            program = isa.decode(members["program.bin"])
            weights = np.frombuffer(members["weights.bin"], np.float32).copy()
            inputs, outputs = manifest.inputs, manifest.outputs
            machine = Machine(
                program,
                weights,
                manifest.memory.arena_bytes // 4,
                [int(np.prod(s.shape)) for s in inputs],
                [int(np.prod(s.shape)) for s in outputs],
            )
        except (KeyError, isa.DecodeError, SimulatorFault) as err:
            raise ArtifactIncompatible(f"not a loadable SA-128 program: {err}") from None
        return SystolicExecutable(
            inputs, outputs, machine, estimate(program, self.config), self.config
        )


class SystolicExecutable:
    def __init__(
        self,
        inputs: tuple[TensorSpec, ...],
        outputs: tuple[TensorSpec, ...],
        machine: Machine,
        cycles: Any,
        config: SimConfig,
    ) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.machine = machine
        self.cycles = cycles
        self.config = config

    def seconds(self) -> float:
        """The chip's estimated seconds per run (the simulator's own wall time says
        nothing about the chip)."""
        return float(self.cycles.seconds(self.config))

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        ins = [np.ascontiguousarray(feeds[s.name], np.float32) for s in self.inputs]
        outs = [np.empty(s.shape, np.float32) for s in self.outputs]
        self.machine.run(ins, outs)
        return {s.name: a for s, a in zip(self.outputs, outs, strict=True)}
