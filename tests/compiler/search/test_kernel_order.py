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
    asked to measure, in order, and the candidates it is extended with."""

    seconds: dict[str, float]
    calls: list[tuple[str, int]] = field(default_factory=list)
    batches: list[dict[str, tuple[Variant, ...]]] = field(default_factory=list)

    def extended(self, candidates: dict[str, tuple[Variant, ...]]) -> Recorder:
        self.batches.append(dict(candidates))
        return self

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


@dataclass
class Counting(Misjudging):
    """A misjudging tuner that records the candidates of every bench it builds."""

    benches: list[dict[str, tuple[Variant, ...]]] = field(default_factory=list)

    def bench(self, sched: Schedule, candidates: object) -> Recorder:
        self.benches.append(dict(candidates))  # type: ignore[call-overload]
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


def test_candidates_are_built_in_batches_that_keep_the_measured_order() -> None:
    from luminal.compiler.search.kernels import _batches

    ranked = {
        h: ([], (DEFAULT,) * n, [0.0] * n) for h, n in zip("abcde", (3, 3, 2, 5, 1), strict=True)
    }
    assert _batches(list("abcde"), ranked, 6) == [["a", "b"], ["c"], ["d", "e"]]
    assert _batches(list("dabce"), ranked, 4) == [["d"], ["a"], ["b"], ["c", "e"]]
    assert _batches([], ranked, 4) == []


def _search(batch_candidates: int | None) -> tuple[list[str], Counting, Recorder]:
    """Search the mlp block with a tuner that times every kernel alike."""
    sched = schedule(mlp_block(layers=2, width=48, batch=5))
    firsts = [ks[0].name for ks in unique(sched, sched.kernels).values()]
    recorder = Recorder({k: 1e-3 for k in firsts})
    tuner = Counting(recorder, {k: 1e-3 for k in firsts})
    deadline = time.monotonic() + 60.0
    search_kernels(
        sched, tuner, None, KernelSearchOptions(deadline, batch_candidates=batch_candidates)
    )
    return firsts, tuner, recorder


def test_a_large_search_builds_the_defaults_then_adds_candidates_in_batches() -> None:
    firsts, tuner, recorder = _search(batch_candidates=2)
    assert tuner.benches == [{k: (DEFAULT,) for k in firsts}]  # one bench, of the defaults
    # then the candidates, added to it
    assert recorder.batches and all(len(vs) == 2 for b in recorder.batches for vs in b.values())
    assert sorted(k for b in recorder.batches for k in b) == sorted(firsts)


def test_a_small_search_builds_one_bench_of_every_candidate() -> None:
    firsts, tuner, recorder = _search(batch_candidates=None)
    assert tuner.benches == [{k: (DEFAULT, OTHER) for k in firsts}] and recorder.batches == []
