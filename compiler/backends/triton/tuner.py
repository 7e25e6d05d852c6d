"""The Triton backends' `Tuner` (search/tuner.py): measured extraction on the GPU.

    candidates  per contraction: tl.dot tiles (BLOCK_M x BLOCK_N x BLOCK_K) that fit the
                problem, and the cuBLAS/hipBLAS GEMM where the operands are plain
                strided matrices; other kernels keep their launch rule
    calibrate   the architecture's nominal f32 peak and memory bandwidth (a ranking
                needs no more: the bench measures)
    estimate    a roofline: useful share of the padded tiles, and of the device's
                compute units when the grid has fewer programs than it has units
    bench       each candidate's model built and loaded (`TritonExecutable`: the warm-up
                compiles its kernels, then it is captured as one CUDA/HIP graph), run on
                random inputs and checked against the reference interpreter, then timed
                as whole-model replays in interleaved rounds: with every other kernel
                the same, the differences between candidates are the kernel's

The timer is injectable (`Timer`): CUDA events around graph replays by default; tests
run the bench in Triton's interpreter (TRITON_INTERPRET=1) with a recorded timer.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from luminal.compiler.backends.protocol import Request
from luminal.compiler.backends.triton import codegen
from luminal.compiler.backends.triton.kernels import KernelWriter
from luminal.compiler.backends.triton.runtime import TritonExecutable, device_for, load_module
from luminal.compiler.inputs import random_inputs
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant
from luminal.compiler.schedule.work import cost
from luminal.compiler.search.tuner import (
    Machine,
    Rounds,
    Timing,
    accuracy_limit,
    time_interleaved,
)
from luminal.references.parity import Check, agrees

if TYPE_CHECKING:
    from luminal.compiler.backends.triton.backend import TritonBackend

#: Seconds per run of `exe` on `feeds`, `reps` times, for kernel `kernel` in `variant`.
Timer = Callable[[TritonExecutable, Mapping[str, np.ndarray], str, Variant, int], list[float]]

#: Contraction tiles tried beside the default: (BLOCK_M, BLOCK_N, BLOCK_K).
TILES = ((32, 32, 32), (64, 64, 32), (128, 64, 32), (64, 128, 32), (128, 128, 32), (64, 64, 64))
#: Nominal f32 GFLOP/s (non-tensor-core FMA), GB/s and compute units per architecture.
NOMINAL = {
    "sm_90": (67_000.0, 3_350.0, 132),
    "sm_89": (82_600.0, 1_008.0, 128),
    "sm_80": (19_500.0, 2_039.0, 108),
    "gfx942": (81_700.0, 5_300.0, 304),
    "gfx90a": (47_900.0, 1_638.0, 110),
}
NOMINAL_OTHER = (20_000.0, 1_000.0, 80)
LAUNCH_OVERHEAD_S = 3e-6  # one kernel in a replayed graph
ROUNDS = Rounds(target_seconds=0.05, max_reps=60, reps=5)


def replay_timer(
    exe: TritonExecutable, feeds: Mapping[str, np.ndarray], kernel: str, variant: Variant, reps: int
) -> list[float]:
    """The default timer: CUDA events around graph replays (wall clock in the interpreter)."""
    return exe.time(feeds, reps, warmup=0)


@dataclass(frozen=True)
class TritonTuner:
    backend: TritonBackend
    request: Request
    timer: Timer | None = None

    @property
    def device_key(self) -> str:
        device = self.request.device
        assert device is not None  # the backend offers no tuner without one
        return f"{self.backend.name}-{device.fingerprint}"

    def candidates(self, sched: Schedule, kernel: Kernel) -> tuple[Variant, ...]:
        if kernel.kind != "contraction":
            return (DEFAULT,)
        opts = self.backend.options(self.request)
        extents = KernelWriter(sched, kernel, opts, DEFAULT).write().launches[0].extents
        m, n, k = (extents.get(p, 1) for p in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
        out = [DEFAULT]
        for bm, bn, bk in TILES:
            if bm <= max(32, 2 * m) and bn <= max(32, 2 * n) and bk <= max(32, 2 * k):
                out.append(Variant(mr=bm, nr=bn, kc=bk))
        blas = Variant(impl="blas")
        if not KernelWriter(sched, kernel, opts, blas).write().notes:
            out.append(blas)
        return tuple(out)

    def calibrate(self) -> Machine:
        device = self.request.device
        arch = device.arch if device is not None else ""
        peak, bandwidth, units = NOMINAL.get(arch, NOMINAL_OTHER)
        return Machine(peak, bandwidth, units, parallel_overhead_s=0.0, call_overhead_s=0.0)

    def estimate(
        self, machine: Machine, sched: Schedule, kernel: Kernel, variant: Variant
    ) -> float:
        c = cost(sched, kernel)
        memory = c.bytes / (machine.bandwidth_gbs * 1e9)
        if kernel.kind != "contraction":
            return max(c.flops / (machine.peak_gflops * 1e9 * 0.5), memory) + LAUNCH_OVERHEAD_S
        opts = self.backend.options(replace(self.request, variants={kernel.name: variant}))
        launch = KernelWriter(sched, kernel, opts, variant).write().launches
        if variant.impl == "blas" or not launch:
            efficiency = 0.8 if c.flops > 1e9 else 0.3
        else:
            params, extents = launch[0].params, launch[0].extents
            useful = 1.0
            programs = 1
            for p in ("BLOCK_M", "BLOCK_N"):
                size, block = extents.get(p, 1), params.get(p, 1)
                blocks = math.ceil(size / block)
                useful *= size / (blocks * block)
                programs *= blocks
            occupancy = min(1.0, programs / machine.cores)
            efficiency = 0.7 * useful * occupancy
        compute = c.flops / (machine.peak_gflops * 1e9 * max(efficiency, 0.01))
        return max(compute, memory) + LAUNCH_OVERHEAD_S

    def bench(self, sched: Schedule, candidates: Mapping[str, Sequence[Variant]]) -> TritonBench:
        feeds = random_inputs(sched.graph.input_specs(), seed=0)
        expected = reference.run(sched.graph, feeds)
        return TritonBench(self, sched, sched.weights_blob(), feeds, expected)


@dataclass(frozen=True)
class TritonBench:
    tuner: TritonTuner
    sched: Schedule
    weights: bytes
    feeds: Mapping[str, np.ndarray]
    expected: Mapping[str, np.ndarray]

    def measure(
        self,
        kernel: Kernel,
        variants: Sequence[Variant],
        order: Sequence[int],
        should_stop: Callable[[], bool],
    ) -> list[Timing]:
        timer = self.tuner.timer or replay_timer
        loaded: dict[int, TritonExecutable] = {}
        verdicts: dict[int, tuple[bool, float]] = {}
        for v in order:
            loaded[v] = self._load(kernel, variants[v])
            verdicts[v] = self._check(loaded[v])
        limit = accuracy_limit(verdicts, variants, list(self.expected.values()))
        checked: dict[int, Timing] = {}
        for v in order:
            ok, err = verdicts[v]
            ok = ok and err <= limit
            if ok:
                timer(loaded[v], self.feeds, kernel.name, variants[v], 1)  # warm-up
            checked[v] = Timing(kernel.name, variants[v], float("inf"), 0, ok, False, err)
        timed = time_interleaved(
            kernel.name,
            checked,
            lambda v, reps: timer(loaded[v], self.feeds, kernel.name, variants[v], reps),
            should_stop,
            ROUNDS,
        )
        return [timed[v] for v in order]

    def extended(
        self, candidates: Mapping[str, Sequence[Variant]], checked: bool = False
    ) -> TritonBench:
        return self  # each candidate's model is generated when it is measured

    def _load(self, kernel: Kernel, variant: Variant) -> TritonExecutable:
        """The model with `kernel` in `variant` (every other kernel in its default)."""
        t = self.tuner
        request = replace(t.request, sched=self.sched, variants={kernel.name: variant})
        opts = t.backend.options(request)
        arch = t.backend.arch(request.device)[0]
        text = codegen.generate(self.sched, opts, arch)
        module = load_module(text, hashlib.sha256(text.encode()).hexdigest()[:16])
        target = {"kind": t.backend.kind, "arch": arch}
        exe = TritonExecutable(module, self.weights, target, device_for(target))
        exe.prepare(cuda_graph=opts.cuda_graph)
        return exe

    def _check(self, exe: TritonExecutable) -> tuple[bool, float]:
        got = exe.run(self.feeds)
        worst = 0.0
        for name, want in self.expected.items():
            ok, err = agrees(got[name], want, Check.KERNEL)
            if not ok:
                return False, err
            worst = max(worst, err)
        return True, worst
