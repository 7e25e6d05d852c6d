"""In-context timing (`search.incontext`): the bench's close finalists decided by their
times inside whole model runs, pads charged to what reads them, the decisions kept in
the tuning database for the next compile, and the wiring in `search_kernels`."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from luminal.compiler.schedule import Kernel, Schedule, schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant
from luminal.compiler.search import incontext
from luminal.compiler.search.incontext import IN_MODEL, Compiled, Finalists
from luminal.compiler.search.kernels import KernelSearchOptions, search_kernels
from luminal.compiler.search.structure import unique
from luminal.compiler.search.tunedb import TuningDB
from luminal.compiler.search.tuner import CallBench, Machine, Timing
from tests.compiler.schedule.test_unpad import _block, _depthwise

TILE = Variant(mr=4, nr=64)
UNPAD = Variant(impl="stencil", unpad=True)
LATE = Variant(mr=2, nr=32)
STENCIL = Variant(impl="stencil")
DEVICE = "test-device"


@dataclass
class ModelClock:
    """A bench whose calls take `seconds[(kernel, index)]` (else `other`), recording each
    call; index -1 is the model's own code."""

    seconds: dict[tuple[str, int], float]
    other: float = 1e-5
    calls: list[tuple[str, int]] = field(default_factory=list)

    def time_call(self, kernel: Kernel, index: int) -> float:
        self.calls.append((kernel.name, index))
        return self.seconds.get((kernel.name, index), self.other)


def _sched() -> tuple[Schedule, Kernel]:
    sched = schedule(_block(c=16, h=24, w=24))
    k = _depthwise(sched)
    assert k.fold is not None
    return sched, k


def _own(sched: Schedule, clock: ModelClock) -> dict[str, tuple[Variant, Compiled]]:
    return {k.name: (DEFAULT, Compiled(clock, -1)) for k in sched.kernels}


def _group(k: Kernel, clock: ModelClock, *variants: Variant) -> Finalists:
    return Finalists("g", k, variants, tuple(Compiled(clock, i) for i in range(len(variants))))


def test_finalists_are_the_close_correct_candidates_fastest_first() -> None:
    timed = [(DEFAULT, 1.0), (TILE, 1.1), (STENCIL, 1.2), (UNPAD, float("inf"))]
    assert incontext.finalists(timed) == (DEFAULT, TILE)
    many = [(Variant(mr=m), 1.0 + m / 100) for m in range(1, 8)]
    assert len(incontext.finalists(many)) == incontext.MAX_FINALISTS
    assert incontext.finalists([]) == ()


def test_the_model_runs_overturn_the_bench_where_the_model_disagrees(tmp_path: Path) -> None:
    sched, k = _sched()
    # the bench's winner (index 0) is slower inside the model than the runner-up
    clock = ModelClock({(k.name, 0): 3e-5, (k.name, 1): 2e-5})
    group = _group(k, clock, TILE, DEFAULT)
    with TuningDB(tmp_path / "t.db") as db:
        decided = incontext.measure(
            sched, [group], _own(sched, clock), db, DEVICE, time.monotonic() + 30
        )
        d = decided["g"]
        assert d.variant == DEFAULT and d.source == "measured"
        # each finalist's in-model cost (its pad included: neither reads the source)
        pad = clock.other
        assert d.seconds == pytest.approx((3e-5 + pad, 2e-5 + pad))
        # both finalists ran equally often, never fewer than the minimum
        runs = [i for name, i in clock.calls if name == k.name]
        assert runs.count(0) == runs.count(1) >= incontext.ROUNDS_PER_FINALIST
        stored = {m.variant: m.seconds for m in db.measurements("g", DEVICE + IN_MODEL)}
        assert stored == {TILE: d.seconds[0], DEFAULT: d.seconds[1]}
        # the next compile decides from the database, without running the model
        clock.calls.clear()
        cached, todo = incontext.from_database(db, DEVICE, [group])
        assert cached["g"].variant == DEFAULT and cached["g"].source == "cache"
        assert todo == [] and clock.calls == []


def test_within_the_margin_the_bench_winner_stays() -> None:
    sched, k = _sched()
    close = 3e-5 * (1 - incontext.MARGIN / 2)
    clock = ModelClock({(k.name, 0): 3e-5, (k.name, 1): close})
    decided = incontext.measure(
        sched, [_group(k, clock, TILE, DEFAULT)], _own(sched, clock), None, DEVICE, 1e18
    )
    assert decided["g"].variant == TILE


def test_a_finalist_reading_the_pads_source_drops_the_pad_and_the_other_pays_for_it() -> None:
    sched, k = _sched()
    assert k.fold is not None
    pad = k.fold.kernel
    # alone, the unpadding stencil is slower; with the pad's kernel it replaces, faster
    clock = ModelClock({(k.name, 0): 1.0e-5, (k.name, 1): 1.4e-5, (pad, -1): 0.6e-5})
    group = _group(k, clock, STENCIL, UNPAD)
    decided = incontext.measure(sched, [group], _own(sched, clock), None, DEVICE, 1e18)
    assert decided["g"].variant == UNPAD
    assert decided["g"].seconds == pytest.approx((1.6e-5, 1.4e-5))
    # the pad ran before its reader in every run but those of the unpadding stencil (the
    # warm-up run is the model as chosen: its own code, reading the pad)
    order = [(name, i) for name, i in clock.calls if name in (pad, k.name)]
    for before, after in itertools.pairwise(order):
        if after[0] == k.name:
            assert (before == (pad, -1)) == (after != (k.name, 1))
    assert order.count((pad, -1)) == order.count((k.name, 0)) + order.count((k.name, -1))


def test_nothing_runs_past_the_deadline_nor_for_a_single_finalist() -> None:
    sched, k = _sched()
    clock = ModelClock({})
    group = _group(k, clock, TILE, DEFAULT)
    past = time.monotonic() - 1
    assert incontext.measure(sched, [group], _own(sched, clock), None, DEVICE, past) == {}
    assert incontext.from_database(None, DEVICE, [_group(k, clock, TILE)]) == ({}, [])
    assert clock.calls == []


# ---- the wiring in search_kernels --------------------------------------------------------


@dataclass
class Bench:
    """A kernel bench where TILE wins every kernel by 5% (within the finalists' ratio) and
    the default is faster inside the model (`time_call`, index -1 or 0: the default).
    With `late`, a third candidate (LATE) times within the ratio too but was stopped early
    (after a round its median was more than the stop ratio above the best's)."""

    calls: list[tuple[str, int]] = field(default_factory=list)
    late: bool = False

    def measure(
        self,
        kernel: Kernel,
        variants: Sequence[Variant],
        order: Sequence[int],
        should_stop: Callable[[], bool] = lambda: False,
    ) -> list[Timing]:
        return [
            Timing(
                kernel.name,
                variants[i],
                {TILE: 0.95e-3, LATE: 1.05e-3}.get(variants[i], 1e-3),
                2 if variants[i] == LATE else 6,
                True,
                variants[i] == LATE,
                0.0,
            )
            for i in order
        ]

    def extended(self, candidates: dict[str, tuple[Variant, ...]], checked: bool = False) -> Bench:
        return self

    def time_call(self, kernel: Kernel, index: int) -> float:
        self.calls.append((kernel.name, index))
        return {1: 2e-3, 2: 3e-3}.get(index, 1e-3)  # TILE, LATE: as the search ranks them


@dataclass
class Tuner:
    bench_: Bench
    device_key: str = DEVICE

    def candidates(self, sched: Schedule, kernel: Kernel) -> tuple[Variant, ...]:
        if kernel.kind != "contraction":
            return (DEFAULT,)
        return (DEFAULT, TILE, LATE) if self.bench_.late else (DEFAULT, TILE)

    def calibrate(self) -> Machine:
        return Machine(peak_gflops=10.0, bandwidth_gbs=10.0, cores=1)

    def estimate(self, machine: Machine, sched: Schedule, kernel: Kernel, v: Variant) -> float:
        return 1e-3

    def bench(self, sched: Schedule, candidates: object) -> Bench:
        return self.bench_


@pytest.mark.parametrize("late", [False, True], ids=["", "stopped-early-finalist"])
def test_the_search_decides_close_calls_in_the_model_then_from_the_database(
    tmp_path: Path, late: bool
) -> None:
    """Cold, the model runs decide each close call; warm, the database does, and the
    choices agree.  A candidate the bench stopped early whose median is within the
    finalists' ratio is a finalist cold as warm: the database keeps its median but not
    that it stopped, and a warm compile missing one finalist's in-model time could not
    reuse the decision (it would keep the bench's winner)."""
    sched, _ = _sched()
    bench = Bench(late=late)
    assert isinstance(bench, CallBench)
    contractions = [
        h for h, ks in unique(sched, sched.kernels).items() if ks[0].kind == "contraction"
    ]
    with TuningDB(tmp_path / "t.db") as db:
        report = search_kernels(
            sched, Tuner(bench), db, KernelSearchOptions(deadline=time.monotonic() + 60)
        )
        by_hash = {c.hash: c for c in report.choices}
        for h in contractions:
            c = by_hash[h]
            assert c.finalists == ((TILE, DEFAULT, LATE) if late else (TILE, DEFAULT))
            assert c.variant == DEFAULT and len(c.in_model) == len(c.finalists)  # overturned
        assert report.in_model == report.changed_in_model == len(contractions)
        assert bench.calls  # the model ran, kernel by kernel
        # a warm search: the bench's winners and the model's decisions from the database
        bench.calls.clear()
        again = search_kernels(
            sched, Tuner(bench), db, KernelSearchOptions(deadline=time.monotonic() + 60)
        )
        assert bench.calls == []
        assert {c.hash: c.variant for c in again.choices} == {
            c.hash: c.variant for c in report.choices
        }
        assert again.in_model == report.in_model
        # without the stage, the bench's winner stands
        off = search_kernels(
            sched,
            Tuner(bench),
            None,
            KernelSearchOptions(deadline=time.monotonic() + 60, in_context=False),
        )
        assert all(c.variant == TILE for c in off.choices if c.hash in contractions)
