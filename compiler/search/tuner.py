"""The seam between the backend-neutral kernel search and a backend's kernel tuning.

The search (`search/kernels.py`) groups kernels, consults the tuning database and
spends the budget; what a kernel *can* be and how fast each choice runs only the backend
knows.  A backend hands the search a `Tuner`:

    device_key                 what its timings are valid for (the database's device)
    candidates(sched, kernel)  legal variants, the default first
    calibrate()                the device's roofline `Machine` (the search keeps it in
                               the tuning database, so it is measured once per device)
    estimate(machine, s, k, v) a cost model's seconds: it only has to rank candidates
    bench(sched, candidates)   a `KernelBench` that checks and times those candidates

and `KernelBench.measure(kernel, variants, order, should_stop)` returns one `Timing` per
candidate: checked against the reference and against the default's own accuracy
(`accuracy_limit`), then timed in interleaved rounds;
`KernelBench.extended(candidates)` adds candidates to a bench (the search builds the
defaults' bench first, then candidates batch by batch).  The CPU
backend times kernels in a generated timing library, the Triton backends time model
runs on the GPU; tests use a recorded timer.  The search never imports a backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant

#: A candidate may differ from the reference by at most this many times what the kernel's
#: default variant does (`accuracy_limit`).  Every candidate passes the reference check
#: (`Check.KERNEL`), but that bound is loose so that reordered sums pass, and a model
#: chains fifty kernels: Winograd F(4x4, 3x3) was 5-8x the direct convolution's error on
#: each of resnet50's 3x3 layers (64 x 56 x 56: 4.7e-5 against 6.2e-6) and, chosen on six
#: of them, doubled the model's difference from ONNX Runtime (7.1e-5 against 4.2e-5, where
#: PyTorch's own is 4.1e-5), so `benchmarks.compare` reported a mismatch.  Tiles, K
#: blocking, OpenBLAS, F(2x2) and the stencil stayed within 1x of the default.
ACCURACY_FACTOR = 4.0

#: The error floor, relative to the largest reference value (at least 1): below it a
#: default's error is rounding of the last bits, which any reordering may change.
ACCURACY_FLOOR = 1e-6


def accuracy_limit(
    verdicts: Mapping[int, tuple[bool, float]],
    variants: Sequence[Variant],
    want: Sequence[np.ndarray],
) -> float:
    """The largest difference from the reference a candidate may have, given each checked
    candidate's (agrees, max error) by index: ACCURACY_FACTOR x the default variant's error,
    never below the floor of the largest value in `want` (the reference values compared);
    no limit beyond the reference check where the default was not checked or failed."""
    default = variants.index(DEFAULT) if DEFAULT in variants else None
    ok, err = verdicts.get(default, (False, 0.0)) if default is not None else (False, 0.0)
    floats = [w for w in want if w.size and np.issubdtype(w.dtype, np.floating)]
    if not ok or not floats:
        return float("inf")
    scale = max(1.0, *(float(np.max(np.abs(w))) for w in floats))
    return ACCURACY_FACTOR * max(err, ACCURACY_FLOOR * scale)


@dataclass(frozen=True)
class Timing:
    kernel: str  # kernel name
    variant: Variant
    seconds: float  # median per call; inf if it failed the check
    samples: int
    ok: bool  # agreed with the reference interpreter
    stopped_early: bool  # dropped after a round as clearly slower than the best
    max_error: float


@dataclass(frozen=True)
class Machine:
    """A roofline calibration of one device, kept per device in the tuning database."""

    peak_gflops: float  # one core (CPU) or the whole device (GPU), f32 FMA
    bandwidth_gbs: float  # streaming copy
    cores: int
    parallel_overhead_s: float = 4e-6  # fork/join of one parallel region
    call_overhead_s: float = 5e-8  # one kernel call

    def roof_gflops(self, flops: float, moved: float, cores: int | None = None) -> float:
        """The roofline: the GFLOP/s attainable at this arithmetic intensity (FLOPs per
        byte moved), the compute peak of `cores` (default all) or what the bandwidth
        feeds, whichever is lower.  `benchmarks/roofline.py` and `luminal profile`
        judge achieved GFLOP/s against it."""
        peak = self.peak_gflops * (cores or self.cores)
        return min(peak, flops / max(moved, 1.0) * self.bandwidth_gbs)


@runtime_checkable
class KernelBench(Protocol):
    def measure(
        self,
        kernel: Kernel,
        variants: Sequence[Variant],
        order: Sequence[int],
        should_stop: Callable[[], bool],
    ) -> list[Timing]: ...

    def extended(
        self, candidates: Mapping[str, Sequence[Variant]], checked: bool = False
    ) -> KernelBench:
        """A bench that can also measure `candidates`, on this one's inputs and reference
        values (the CPU compiles only the candidates; a bench that builds each candidate
        when it measures it returns itself).  `checked`: they are only run, in model runs
        (`CallBench`), not measured: no reference values for them."""
        ...


@runtime_checkable
class Tuner(Protocol):
    device_key: str

    def candidates(self, sched: Schedule, kernel: Kernel) -> tuple[Variant, ...]: ...

    def calibrate(self) -> Machine: ...

    def estimate(
        self, machine: Machine, sched: Schedule, kernel: Kernel, variant: Variant
    ) -> float: ...

    def bench(
        self, sched: Schedule, candidates: Mapping[str, Sequence[Variant]]
    ) -> KernelBench: ...


@runtime_checkable
class CallBench(Protocol):
    """A `KernelBench` that can also run a model kernel by kernel (`search.incontext`)."""

    def time_call(self, kernel: Kernel, index: int) -> float:
        """One call of `kernel` in candidate `index` of this bench (-1: the model's own
        code), timed, on the bench's buffers as the calls before it left them."""
        ...


def kendall_tau(predicted: Sequence[float], measured: Sequence[float]) -> float | None:
    """Rank agreement in [-1, 1] between estimates and timings (None below 2 points)."""
    n = len(predicted)
    if n < 2:
        return None
    concordant = discordant = 0
    for i in range(n):
        for j in range(i + 1, n):
            a = (predicted[i] - predicted[j]) * (measured[i] - measured[j])
            if a > 0:
                concordant += 1
            elif a < 0:
                discordant += 1
    return (concordant - discordant) / (n * (n - 1) / 2)


@dataclass(frozen=True)
class Rounds:
    """How long candidates are timed: until each has `target_seconds` of samples (at
    least 6, at most `max_reps`), dropping after a round any whose median is
    `stop_ratio` x the best median."""

    target_seconds: float = 0.03
    max_reps: int = 40
    stop_ratio: float = 1.25
    reps: int = 3  # samples per candidate per round


ROUNDS = Rounds()


def time_interleaved(
    kernel: str,
    checked: Mapping[int, Timing],
    time_one: Callable[[int, int], list[float]],
    should_stop: Callable[[], bool],
    rounds: Rounds = ROUNDS,
) -> dict[int, Timing]:
    """Time the candidates of `checked` (by index) that passed their check, in
    interleaved rounds, so a burst of load on a shared machine hits every candidate
    alike; `time_one(index, reps)` returns `reps` seconds per call.  Returns `checked`
    with the medians filled in."""
    alive = [v for v, t in checked.items() if t.ok]
    samples: dict[int, list[float]] = {v: [] for v in alive}
    stopped: set[int] = set()
    while alive and not should_stop():
        for v in alive:
            samples[v].extend(time_one(v, rounds.reps))
        medians = {v: float(np.median(samples[v])) for v in alive}
        best = min(medians.values())
        for v in list(alive):
            if medians[v] > rounds.stop_ratio * best:
                alive.remove(v)
                stopped.add(v)
        enough = [
            v
            for v in alive
            if len(samples[v])
            >= min(rounds.max_reps, max(6, int(rounds.target_seconds / max(medians[v], 1e-7))))
        ]
        if len(enough) == len(alive):
            break
    out = dict(checked)
    for v, got in samples.items():
        if got:
            t = checked[v]
            out[v] = Timing(
                kernel, t.variant, float(np.median(got)), len(got), True, v in stopped, t.max_error
            )
    return out
