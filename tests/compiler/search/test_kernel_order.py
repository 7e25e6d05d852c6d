"""The search spends its budget on the kernels that take the time, as measured: a kernel
the cost model underestimates is still measured first when its default runs longest."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from luminal.compiler.schedule import Kernel, Schedule, schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant
from luminal.compiler.search.kernels import KernelSearchOptions, search_kernels
from luminal.compiler.search.structure import unique
from luminal.compiler.search.tuner import Machine, Timing
from tests.compiler.search.search_graphs import mlp_block

OTHER = Variant(impl="generated", mr=4, nr=8)


@dataclass
class Recorder:
    """A kernel bench whose default runs take `seconds[kernel]`; it records what it is
    asked to measure, in order."""

    seconds: dict[str, float]
    calls: list[tuple[str, int]] = field(default_factory=list)

    def measure(
        self,
        kernel: Kernel,
        variants: Sequence[Variant],
        order: Sequence[int],
        should_stop: Callable[[], bool],
    ) -> list[Timing]:
        self.calls.append((kernel.name, len(variants)))
        base = self.seconds[kernel.name]
        return [
            Timing(
                kernel.name,
                variants[i],
                base * (1.0 if variants[i] == DEFAULT else 0.5),
                6,
                True,
                False,
                0.0,
            )
            for i in order
        ]


@dataclass
class Misjudging:
    """A tuner whose cost model ranks the kernels the reverse of their measured time."""

    bench_: Recorder
    estimates: dict[str, float]
    device_key: str = "test-device"

    def candidates(self, sched: Schedule, kernel: Kernel) -> tuple[Variant, ...]:
        return (DEFAULT, OTHER)

    def calibrate(self) -> Machine:
        return Machine(peak_gflops=10.0, bandwidth_gbs=10.0, cores=1)

    def estimate(self, machine: Machine, sched: Schedule, kernel: Kernel, v: Variant) -> float:
        return self.estimates[kernel.name]

    def bench(self, sched: Schedule, candidates: object) -> Recorder:
        return self.bench_


def test_groups_are_measured_in_the_order_of_their_measured_default_time() -> None:
    sched = schedule(mlp_block(layers=2, width=48, batch=5))
    firsts = [ks[0].name for ks in unique(sched, sched.kernels).values()]
    assert len(firsts) >= 2
    # measured time grows along the list, the estimate shrinks: the model has them reversed
    seconds = {k: 1e-3 * (n + 1) for n, k in enumerate(firsts)}
    estimates = {k: 1e-3 * (len(firsts) - n) for n, k in enumerate(firsts)}
    bench = Recorder(seconds)
    report = search_kernels(
        sched,
        Misjudging(bench, estimates),
        None,
        KernelSearchOptions(deadline=time.monotonic() + 60.0),
    )
    full = [name for name, n in bench.calls if n > 1]
    instances = {ks[0].name: len(ks) for ks in unique(sched, sched.kernels).values()}
    want = sorted(firsts, key=lambda k: -seconds[k] * instances[k])
    assert full == want
    # every group was surveyed (its default alone) before any was measured in full
    survey = [name for name, n in bench.calls if n == 1]
    assert sorted(survey) == sorted(firsts)
    assert bench.calls.index((full[0], 2)) == len(firsts)
    assert all(c.variant == OTHER for c in report.choices)
