"""In-context timing: the kernel bench's close finalists, decided inside whole model runs.

The kernel bench (`search.kernels`) times a kernel alone, in a loop: its weights, input
and destination stay in cache between calls.  In the model they do not: a kernel's
weights come from L3 or memory after fifty other kernels ran, its input sits in the
caches of the cores that wrote it.  The two can disagree by far more than the bench
separates its best candidates: resnet50's 3x3 stride-2 layer at batch 8 ran its two best
tiles 9.2 and 9.4 ms alone and 18.2 and 13.0 ms in the model.  So after the bench, each
kernel group whose runners-up came within `FINALIST_RATIO` of its winner is decided by
timing those finalists where they run:

    a model run calls every kernel in turn, timed, from the library that compiled its
      variant (`CallBench.time_call`): the bench's own libraries, and one more holding
      the chosen variants no bench compiled (a group's other instances, the database's
      winners); only a group's first kernel, the one its bench compiled, is varied
    a warm-up run, then model runs, ROUNDS_PER_FINALIST to MAX_ROUNDS_PER_FINALIST per
      finalist of the group with the most (as many as fit in TARGET_SECONDS); in run r,
      group g runs its finalist (r + g) mod (its finalists), so each finalist of each
      group runs equally often, beside neighbours in every state
    a group's cost in a run: its kernel's seconds, plus its pad's kernel unless the
      finalist reads the pad's source (`Variant.unpad`: then that kernel does not run,
      as `schedule.unpad` drops it from the model)
    the winner: the finalist of least median cost, the bench's winner unless another
      is faster by more than MARGIN

Runs stop at the search's deadline and after MAX_SECONDS (the bench leaves them RESERVE
of its time).  Every group's medians go to the tuning database under the device
`<device>/in-model` (IN_MODEL), so a warm compile decides from them without running the
model again.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from luminal._version import __version__
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import Variant
from luminal.compiler.search.tunedb import Measurement, TuningDB
from luminal.compiler.search.tuner import CallBench

#: A candidate is a finalist when the bench timed it within this factor of the winner.
FINALIST_RATIO = 1.15
#: Finalists per group at most, the bench's winner first.
MAX_FINALISTS = 3
#: Model runs per finalist of the group with the most finalists: as many as fit in
#: TARGET_SECONDS, at least ROUNDS_PER_FINALIST (time allowing) and at most
#: MAX_ROUNDS_PER_FINALIST.
ROUNDS_PER_FINALIST = 8
MAX_ROUNDS_PER_FINALIST = 30
TARGET_SECONDS = 2.0
#: Model runs are given up when fewer than this many per finalist fit the time left.
MIN_ROUNDS_PER_FINALIST = 3
#: Seconds of model runs at most.
MAX_SECONDS = 6.0
#: The share of the search's time left for the model runs (at most MAX_SECONDS): the
#: bench stops measuring there.
RESERVE = 0.1
#: Another finalist replaces the bench's winner only when its median is this much lower.
MARGIN = 0.02
#: The tuning database's device suffix for in-model medians.
IN_MODEL = "/in-model"


@dataclass(frozen=True)
class Compiled:
    """Where a kernel's candidate can be called: a bench and its index there (-1: the
    model's own code, in the bench built with the model)."""

    bench: CallBench
    index: int


@dataclass(frozen=True)
class Finalists:
    """One kernel group's finalists, the bench's winner first, where each is compiled
    (empty when not all are: decided only from the database), and the kernel they run as
    (the group's first: the one its bench compiled; the others run as chosen)."""

    hash: str
    kernel: Kernel
    variants: tuple[Variant, ...]
    at: tuple[Compiled, ...]


@dataclass(frozen=True)
class Decision:
    """What the model runs (or the database) said about one group."""

    hash: str
    variant: Variant  # the winner in the model
    seconds: tuple[float, ...]  # each finalist's median cost per kernel, by finalist
    source: str  # "measured" | "cache"


def finalists(timed: Sequence[tuple[Variant, float]]) -> tuple[Variant, ...]:
    """Of the correct candidates and their bench seconds, those within FINALIST_RATIO of
    the fastest, fastest first, at most MAX_FINALISTS (one: nothing to decide)."""
    ok = sorted((t for t in timed if t[1] != float("inf")), key=lambda t: t[1])
    if not ok:
        return ()
    return tuple(v for v, s in ok if s <= FINALIST_RATIO * ok[0][1])[:MAX_FINALISTS]


def from_database(
    db: TuningDB | None, device: str, groups: Sequence[Finalists]
) -> tuple[dict[str, Decision], list[Finalists]]:
    """The groups with two finalists or more, decided where the database holds every
    finalist's in-model median; and the others, to `measure` (those whose finalists are
    all compiled here)."""
    out: dict[str, Decision] = {}
    todo: list[Finalists] = []
    for g in groups:
        if len(g.variants) < 2:
            continue
        cached = _cached(db, device, g)
        if cached is not None:
            out[g.hash] = cached
        elif g.at:
            todo.append(g)
    return out, todo


def measure(
    sched: Schedule,
    todo: Sequence[Finalists],
    chosen: Mapping[str, tuple[Variant, Compiled]],
    db: TuningDB | None,
    device: str,
    deadline: float,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Decision]:
    """The in-model winner of each group in `todo`, from model runs where every other
    kernel runs as `chosen` (kernel name -> its variant and where that is compiled), kept
    in the database.  None decided when the deadline leaves less than
    MIN_ROUNDS_PER_FINALIST runs."""
    out: dict[str, Decision] = {}
    if not todo or time.monotonic() >= deadline:
        return out
    started = time.monotonic()
    run = _Run(sched, chosen)
    run({})  # warm-up, and the time of one run
    per_run = max(time.monotonic() - started, 1e-6)
    most = max(len(g.variants) for g in todo)
    wanted = max(ROUNDS_PER_FINALIST, min(MAX_ROUNDS_PER_FINALIST, TARGET_SECONDS / per_run / most))
    runs = min(int(wanted) * most, int(min(MAX_SECONDS, deadline - time.monotonic()) / per_run))
    if runs < MIN_ROUNDS_PER_FINALIST * most:
        return out
    costs: dict[str, list[list[float]]] = {g.hash: [[] for _ in g.variants] for g in todo}
    for r in range(runs):
        if progress:
            progress("timing finalists in the model", r, runs)
        picks = {g.hash: (r + n) % len(g.variants) for n, g in enumerate(todo)}
        seconds = run(
            {g.kernel.name: (g.variants[picks[g.hash]], g.at[picks[g.hash]]) for g in todo}
        )
        for g in todo:
            i = picks[g.hash]
            costs[g.hash][i].append(_cost(g.kernel, g.variants[i], seconds))
    if progress:
        progress("timed finalists in the model", runs, runs)
    rows: list[Measurement] = []
    for g in todo:
        medians = tuple(statistics.median(c) for c in costs[g.hash])
        out[g.hash] = Decision(g.hash, _winner(g.variants, medians), medians, "measured")
        k = g.kernel
        shape = "x".join(map(str, sched.graph.nodes[k.node].shape)) or "scalar"
        rows += [
            Measurement(g.hash, device + IN_MODEL, __version__, v, s, None, True, k.kind, shape)
            for v, s in zip(g.variants, medians, strict=True)
        ]
    if db is not None:
        db.record(rows)
    return out


@dataclass(frozen=True)
class _Run:
    """One model run, kernel by kernel, each timed: `chosen` overridden by the picks.  A
    pad whose reader reads its source instead (`Variant.unpad`) does not run, as in the
    model written (`schedule.unpad`)."""

    sched: Schedule
    chosen: Mapping[str, tuple[Variant, Compiled]]

    def __call__(self, picks: Mapping[str, tuple[Variant, Compiled]]) -> dict[str, float]:
        calls = {**self.chosen, **picks}
        dropped = {
            k.fold.kernel
            for k in self.sched.kernels
            if k.fold is not None and k.name in calls and calls[k.name][0].unpad
        }
        seconds: dict[str, float] = {}
        for k in self.sched.kernels:
            if k.name in dropped:
                seconds[k.name] = 0.0
                continue
            at = calls[k.name][1]
            seconds[k.name] = at.bench.time_call(k, at.index)
        return seconds


def _cost(kernel: Kernel, variant: Variant, seconds: Mapping[str, float]) -> float:
    """What `kernel` costs in one run: its own seconds, plus its pad's kernel unless the
    variant reads the pad's source instead (then that kernel did not run)."""
    f = kernel.fold
    return seconds[kernel.name] + (
        seconds[f.kernel] if f is not None and not variant.unpad else 0.0
    )


def _winner(variants: Sequence[Variant], medians: Sequence[float]) -> Variant:
    best = min(range(len(variants)), key=lambda i: medians[i])
    return variants[best] if medians[best] < (1 - MARGIN) * medians[0] else variants[0]


def _cached(db: TuningDB | None, device: str, g: Finalists) -> Decision | None:
    if db is None:
        return None
    stored = {m.variant: m.seconds for m in db.measurements(g.hash, device + IN_MODEL, __version__)}
    if not all(v in stored for v in g.variants):
        return None
    medians = tuple(stored[v] for v in g.variants)
    return Decision(g.hash, _winner(g.variants, medians), medians, "cache")
