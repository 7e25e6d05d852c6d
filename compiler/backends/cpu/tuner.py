"""The CPU backend's `Tuner` (search/tuner.py): what the kernel search may try for a CPU
kernel, how the roofline model ranks it, and how it is checked and timed.

    candidates  `variants.candidates`: register tiles, K blocking, OpenBLAS, Winograd,
                the other parallel setting near the threshold; the default first
    calibrate   an FMA loop and a streaming copy built by the model's own toolchain
    estimate    `costmodel.estimate` with the default register tile of these features
    bench       one timing library holding every candidate (`bench.build`), run on the
                model's real intermediate values
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from luminal.compiler.backends.cpu import bench, codegen, costmodel, toolchain, variants
from luminal.compiler.inputs import random_inputs
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import Variant
from luminal.compiler.search.tuner import Machine


@dataclass(frozen=True)
class CpuTuner:
    device_key: str  # "cpu-<fingerprint>-t<threads>"
    codegen: codegen.CodegenOptions
    toolchain: toolchain.Toolchain
    flags: tuple[str, ...]
    features: tuple[str, ...]
    cores: int

    def candidates(self, sched: Schedule, kernel: Kernel) -> tuple[Variant, ...]:
        return variants.candidates(sched, kernel, self.features)

    def calibrate(self) -> Machine:
        return costmodel.calibrate(self.toolchain, self.flags, self.cores)

    def estimate(
        self, machine: Machine, sched: Schedule, kernel: Kernel, variant: Variant
    ) -> float:
        tile = (self.codegen.mr, self.codegen.nr)
        oriented = kernel.oriented(variant.orient)
        return costmodel.estimate(machine, sched, oriented, replace(variant, orient=0), tile)

    def bench(
        self, sched: Schedule, candidates: Mapping[str, Sequence[Variant]]
    ) -> bench.TimingLibrary:
        return bench.build(
            sched,
            self.codegen,
            candidates,
            self.toolchain,
            self.flags,
            sched.weights_blob(),
            random_inputs(sched.graph.input_specs()),
        )
