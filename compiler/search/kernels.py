"""Measured extraction: choose one variant per kernel by timing the best candidates.

Backend-neutral: what a kernel can be, what it costs and how it is timed come from the
backend's `Tuner` (search/tuner.py); this module only spends the budget.

    group kernels by structure hash (identical layers are searched once)
      -> tuning database hit? take the stored winner
      -> else rank the group's candidates with the cost model, keep the best K (the
         default always stays in, as the baseline), and queue the group
    one kernel bench of every queued group's default (on the CPU: the model's own code
      with timing entry points), and of their candidates too when they are no more than
      the model has kernels: time each default once, and order the groups by that
      time x instances, the most first
    then, batch by batch in that order (candidates added to the bench, about as many as
    the model has kernels at a time, so the first measurements start early on a large
    model), while the budget lasts:
      check each candidate against the reference interpreter, time it (median of
      repeats, early stop when clearly slower), store every timing in the database
    winner = fastest correct candidate; unmeasured groups keep the default
    the groups whose runners-up came within a few percent: decided inside whole model
      runs in the time left (`search.incontext`; the bench stops at 90% of it)

Ctrl-C (KeyboardInterrupt) or an exhausted budget stops measuring; what was measured is
kept (and already stored), so the compile still writes the best artifact found so far.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from luminal._version import __version__
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant
from luminal.compiler.search import incontext
from luminal.compiler.search.structure import unique
from luminal.compiler.search.tunedb import Measurement, TuningDB
from luminal.compiler.search.tuner import (
    CallBench,
    KernelBench,
    Machine,
    Timing,
    Tuner,
    kendall_tau,
)


@dataclass(frozen=True)
class KernelChoice:
    kernel: str  # the group's first kernel
    hash: str
    kind: str
    shape: str
    instances: int  # kernels sharing this structure
    variant: Variant
    source: str  # "cache" | "measured" | "default" (one candidate, or not reached)
    seconds: float | None  # the bench winner's median (the model runs may choose another)
    default_seconds: float | None
    candidates: int
    measured: int
    tau: float | None  # cost model vs timing rank agreement on this kernel
    model_pick: Variant | None = None  # the cost model's first choice, when measured
    # the bench's close runners-up, its winner first (`incontext.finalists`), and their
    # medians per kernel inside model runs when those decided (`incontext.measure`)
    finalists: tuple[Variant, ...] = ()
    in_model: tuple[float, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "kernel": self.kernel,
            "hash": self.hash,
            "kind": self.kind,
            "shape": self.shape,
            "instances": self.instances,
            "variant": self.variant.label,
            "source": self.source,
            "seconds": self.seconds,
            "default_seconds": self.default_seconds,
            "candidates": self.candidates,
            "measured": self.measured,
            "tau": self.tau,
            "model_pick": None if self.model_pick is None else self.model_pick.label,
            "finalists": [v.label for v in self.finalists],
            "in_model_seconds": list(self.in_model) or None,
        }


@dataclass(frozen=True)
class KernelSearchReport:
    choices: tuple[KernelChoice, ...]
    interrupted: bool
    out_of_budget: bool
    seconds: float
    machine: Machine | None
    variants: Mapping[str, Variant] = field(default_factory=dict)  # kernel name -> choice

    @property
    def cache_hits(self) -> int:
        return sum(c.source == "cache" for c in self.choices)

    @property
    def measured(self) -> int:
        return sum(c.source == "measured" for c in self.choices)

    @property
    def in_model(self) -> int:
        """Groups whose close finalists were decided inside model runs."""
        return sum(bool(c.in_model) for c in self.choices)

    @property
    def changed_in_model(self) -> int:
        """Of those, the groups where the model runs overturned the bench's winner."""
        return sum(bool(c.in_model) and c.variant != c.finalists[0] for c in self.choices)

    @property
    def mean_tau(self) -> float | None:
        taus = [c.tau for c in self.choices if c.tau is not None]
        return float(np.mean(taus)) if taus else None

    @property
    def top1_agreement(self) -> float | None:
        """Share of measured kernels where the cost model's first pick won."""
        rows = [c for c in self.choices if c.source == "measured" and c.measured >= 2]
        return sum(c.variant == c.model_pick for c in rows) / len(rows) if rows else None

    def estimated_speedup(self) -> float | None:
        """Sum of default kernel time over chosen kernel time, over measured kernels."""
        pairs = [
            (c.default_seconds * c.instances, c.seconds * c.instances)
            for c in self.choices
            if c.seconds is not None and c.default_seconds is not None
        ]
        if not pairs:
            return None
        return sum(a for a, _ in pairs) / max(sum(b for _, b in pairs), 1e-12)

    def to_json(self) -> dict[str, object]:
        return {
            "kernels": len(self.choices),
            "cache_hits": self.cache_hits,
            "measured": self.measured,
            "interrupted": self.interrupted,
            "out_of_budget": self.out_of_budget,
            "seconds": self.seconds,
            "in_model": self.in_model,
            "changed_in_model": self.changed_in_model,
            "cost_model_tau": self.mean_tau,
            "cost_model_top1": self.top1_agreement,
            "estimated_speedup": self.estimated_speedup(),
            "machine": None if self.machine is None else self.machine.__dict__,
            "choices": [c.to_json() for c in self.choices],
        }


@dataclass(frozen=True)
class KernelSearchOptions:
    deadline: float  # time.monotonic() by which the chosen kernels are built: measuring stops a build before
    top_k: int = 4
    use_cache: bool = True
    measure: bool = True
    batch_candidates: int | None = None  # per kernel bench; None: the model's kernel count
    in_context: bool = True  # close finalists decided in model runs (`search.incontext`)


def search_kernels(
    sched: Schedule,
    tuner: Tuner,
    db: TuningDB | None,
    options: KernelSearchOptions,
    progress: Callable[[str, int, int], None] | None = None,
) -> KernelSearchReport:
    start = time.monotonic()
    device = tuner.device_key
    groups = unique(sched, sched.kernels)
    chosen: dict[str, KernelChoice] = {}
    queued: dict[str, tuple[list[Kernel], tuple[Variant, ...]]] = {}
    for h, kernels in groups.items():
        k = kernels[0]
        variants = _candidates(tuner, sched, k)
        hit = db.winner(h, device, __version__) if (db is not None and options.use_cache) else None
        if hit is not None and hit.variant in variants:
            assert db is not None
            base = db.timing(h, device, __version__, DEFAULT)
            choice = _choice(
                sched, h, kernels, hit.variant, "cache", hit.seconds, base, len(variants), 0, None
            )
            stored = [
                (m.variant, m.seconds)
                for m in db.measurements(h, device, __version__)
                if m.ok and m.variant in variants
            ]
            chosen[h] = dataclasses.replace(choice, finalists=incontext.finalists(stored))
        elif len(variants) == 1 or not options.measure:
            chosen[h] = _choice(
                sched, h, kernels, DEFAULT, "default", None, None, len(variants), 0, None
            )
        else:
            queued[h] = (kernels, variants)

    interrupted = out_of_budget = False
    machine: Machine | None = None
    # the bench measures until `until`, leaving the rest for the model runs
    reserve = min(incontext.MAX_SECONDS, incontext.RESERVE * (options.deadline - start))
    end = options.deadline  # measuring ends here, model runs included
    until = end - (reserve if options.in_context else 0.0)
    # each measured group's bench and the variants it holds (for the model runs)
    compiled: dict[str, tuple[KernelBench, tuple[Variant, ...]]] = {}
    survey: KernelBench | None = None
    if queued:
        try:
            machine = device_machine(db, tuner)
            ranked: dict[str, tuple[list[Kernel], tuple[Variant, ...], list[float]]] = {}
            for h, (kernels, variants) in queued.items():
                est = [tuner.estimate(machine, sched, kernels[0], v) for v in variants]
                keep = sorted(range(len(variants)), key=lambda i: est[i])[: options.top_k]
                if 0 not in keep:
                    keep = [*keep[: options.top_k - 1], 0]
                keep += _input_twins(variants, est, keep)
                ranked[h] = (kernels, tuple(variants[i] for i in keep), [est[i] for i in keep])
            if progress:
                progress("building the kernel bench", 0, len(ranked))
            most = options.batch_candidates or max(BATCH_MIN, len(sched.kernels))
            whole = sum(len(vs) for _, vs, _ in ranked.values()) <= most  # one bench will do
            building = time.monotonic()
            survey = tuner.bench(
                sched,
                {ks[0].name: vs if whole else (DEFAULT,) for ks, vs, _ in ranked.values()},
            )
            # After the search the artifact's library is built, about as long as this
            # bench of the model's kernels took: measuring leaves that time, so that a
            # cold compile ends near its budget, not a build after it.
            tail = time.monotonic() - building
            end, until = end - tail, until - tail
            order = _by_measured_cost(ranked, survey, until, progress)
            done = 0
            for batch in [order] if whole else _batches(order, ranked, most):
                if time.monotonic() >= until:
                    out_of_budget = True
                    break
                if progress and not whole:
                    progress("building the kernel bench", done, len(order))
                lib = (
                    survey
                    if whole
                    else survey.extended({ranked[h][0][0].name: ranked[h][1] for h in batch})
                )
                for h in batch:
                    kernels, variants, est = ranked[h]
                    if time.monotonic() >= until:
                        out_of_budget = True
                        break
                    if progress:
                        progress(
                            f"measuring {kernels[0].name} ({kernels[0].kind})", done, len(order)
                        )
                    done += 1
                    rank = sorted(range(len(variants)), key=lambda i: est[i])
                    timings = lib.measure(
                        kernels[0],
                        variants,
                        rank,
                        lambda: time.monotonic() >= until,
                    )
                    chosen[h] = _from_timings(sched, h, kernels, variants, est, timings)
                    compiled[h] = (lib, variants)
                    if db is not None:
                        k0 = kernels[0]
                        db.record(
                            Measurement(
                                h,
                                device,
                                __version__,
                                t.variant,
                                t.seconds,
                                est[variants.index(t.variant)],
                                t.ok,
                                k0.kind,
                                _shape(sched, k0),
                            )
                            for t in timings
                        )
                if out_of_budget:
                    break
            if progress:
                progress("measured", len(order), len(order))
        except KeyboardInterrupt:
            interrupted = True
    if options.in_context and not interrupted:
        try:
            _decide_in_model(sched, survey, compiled, db, device, groups, chosen, end, progress)
        except KeyboardInterrupt:
            interrupted = True
    for h, kernels in groups.items():
        if h not in chosen:
            n = len(queued[h][1]) if h in queued else 1
            chosen[h] = _choice(sched, h, kernels, DEFAULT, "default", None, None, n, 0, None)
    variants_by_kernel = {
        k.name: chosen[h].variant
        for h, ks in groups.items()
        for k in ks
        if chosen[h].variant != DEFAULT
    }
    return KernelSearchReport(
        tuple(chosen[h] for h in groups),
        interrupted,
        out_of_budget,
        time.monotonic() - start,
        machine,
        variants_by_kernel,
    )


#: Candidates per kernel bench at least; a bench holds about as many candidates as the
#: model has kernels, so building one costs about two builds of the model and the first
#: measurements start early even when a large model's candidates would take the whole
#: budget to compile at once.
BATCH_MIN = 32


def _batches(
    order: list[str],
    ranked: Mapping[str, tuple[list[Kernel], tuple[Variant, ...], list[float]]],
    most: int,
) -> list[list[str]]:
    """`order` cut into consecutive batches of at most `most` candidates (a group's
    candidates are never split; a group with more than `most` is a batch of its own)."""
    out: list[list[str]] = []
    size = 0
    for h in order:
        n = len(ranked[h][1])
        if not out or size + n > most:
            out.append([])
            size = 0
        out[-1].append(h)
        size += n
    return out


def _by_measured_cost(
    ranked: Mapping[str, tuple[list[Kernel], tuple[Variant, ...], list[float]]],
    lib: KernelBench,
    deadline: float,
    progress: Callable[[str, int, int], None] | None,
) -> list[str]:
    """The groups in the order to measure them: the most time first, where a group's time
    is its default variant's, timed once here, times its instances.  The cost model only
    ranks a kernel's variants; which kernels matter is measured, so a kernel the model
    misjudges (a depthwise stencil, a store-bound small-K product) still gets the budget
    its real time deserves.  Groups not surveyed before the deadline follow, by the
    default's estimate."""

    def estimated(h: str) -> float:
        kernels, variants, est = ranked[h]
        return est[variants.index(DEFAULT)] * len(kernels)

    by_estimate = sorted(ranked, key=lambda h: -estimated(h))
    measured: dict[str, float] = {}
    for n, h in enumerate(by_estimate):
        if time.monotonic() >= deadline:
            break
        if progress:
            progress("timing each kernel's default", n, len(by_estimate))
        kernels = ranked[h][0]
        (t,) = lib.measure(kernels[0], (DEFAULT,), [0], lambda: time.monotonic() >= deadline)
        measured[h] = (t.seconds if t.ok else float("inf")) * len(kernels)
    surveyed = sorted(measured, key=lambda h: -measured[h])
    return [*surveyed, *(h for h in by_estimate if h not in measured)]


#: Input twins measured beside the top-k (`_input_twins`).
INPUT_TWINS = 2


def _input_twins(variants: tuple[Variant, ...], est: list[float], keep: list[int]) -> list[int]:
    """The candidates that build their input themselves (`Variant.unpad`: the pad's rows
    from its source; `Variant.compact`: a strided input packed) whose twin reading the
    input as planned is among those kept, up to `INPUT_TWINS`, best-estimated first:
    how to read the input is a choice beside the tile, so it is measured where the best
    tiles are, in addition to them."""
    kept = {variants[i] for i in keep}
    twins = [
        i
        for i in sorted(range(len(variants)), key=lambda i: est[i])
        if i not in keep
        and (variants[i].unpad or variants[i].compact)
        and dataclasses.replace(variants[i], unpad=False, compact=False) in kept
    ]
    return twins[:INPUT_TWINS]


def _candidates(tuner: Tuner, sched: Schedule, kernel: Kernel) -> tuple[Variant, ...]:
    """The tuner's candidates, the default first and without duplicates."""
    return tuple(dict.fromkeys((DEFAULT, *tuner.candidates(sched, kernel))))


def device_machine(db: TuningDB | None, tuner: Tuner) -> Machine:
    """The device's roofline calibration, from the tuning database when it was measured
    before (else measured now and kept): the search's cost model, `luminal profile` and
    `benchmarks/roofline.py` all read it here."""
    if db is not None:
        cached = db.machine(tuner.device_key)
        if cached is not None:
            return cached
    m = tuner.calibrate()
    if db is not None:
        db.record_machine(tuner.device_key, m)
    return m


def _from_timings(
    sched: Schedule,
    h: str,
    kernels: list[Kernel],
    variants: tuple[Variant, ...],
    est: list[float],
    timings: list[Timing],
) -> KernelChoice:
    ok = [t for t in timings if t.ok and t.seconds != float("inf")]
    default = next((t.seconds for t in ok if t.variant == DEFAULT), None)
    full = [t for t in ok if not t.stopped_early]
    # every correct timing, stopped early too: a warm compile finds the finalists from the
    # database's medians (which do not say which stopped) and must find the same ones to
    # reuse their in-model decision
    close = incontext.finalists([(t.variant, t.seconds) for t in ok])
    tau = kendall_tau([est[variants.index(t.variant)] for t in full], [t.seconds for t in full])
    if not ok:
        return _choice(
            sched, h, kernels, DEFAULT, "default", None, None, len(variants), len(timings), None
        )
    best = min(ok, key=lambda t: t.seconds)
    pick = variants[min(range(len(variants)), key=lambda i: est[i])]
    choice = _choice(
        sched,
        h,
        kernels,
        best.variant,
        "measured",
        best.seconds,
        default,
        len(variants),
        len(timings),
        tau,
    )
    return dataclasses.replace(choice, model_pick=pick, finalists=close)


def _decide_in_model(
    sched: Schedule,
    survey: KernelBench | None,
    compiled: Mapping[str, tuple[KernelBench, tuple[Variant, ...]]],
    db: TuningDB | None,
    device: str,
    groups: Mapping[str, list[Kernel]],
    chosen: dict[str, KernelChoice],
    deadline: float,
    progress: Callable[[str, int, int], None] | None,
) -> None:
    """`chosen` with each group whose bench finalists were close decided by their times
    inside model runs (`search.incontext`), or by the database's record of those.  The
    runs call each candidate where the bench compiled it (`compiled`: a measured group's
    bench and the variants it holds, for the group's first kernel only); the others run
    the model's own code (`survey`, the bench built with the model).  No runs where there
    is none or it cannot run a model kernel by kernel (`CallBench`): the database alone
    decides."""
    model = survey if isinstance(survey, CallBench) else None

    def at(h: str, v: Variant) -> incontext.Compiled | None:
        lib, variants = compiled.get(h, (None, ()))
        if model is None or v not in variants or not isinstance(lib, CallBench):
            return None
        return incontext.Compiled(lib, variants.index(v))

    runs: dict[str, tuple[Variant, incontext.Compiled]] = {}
    rest: dict[str, tuple[Variant]] = {}  # chosen, but compiled nowhere yet
    close: list[incontext.Finalists] = []
    for h, kernels in groups.items():
        c = chosen.get(h)  # None: not reached, the default
        variant = DEFAULT if c is None else c.variant
        where = at(h, variant)
        for n, k in enumerate(kernels):
            if n == 0 and where is not None:
                runs[k.name] = (variant, where)
            elif model is not None:  # in the model's own code, when it is the default
                runs[k.name] = (DEFAULT, incontext.Compiled(model, -1))
                if variant != DEFAULT:
                    rest[k.name] = (variant,)
        if c is not None and len(c.finalists) >= 2 and c.finalists[0] == c.variant:
            places = [at(h, v) for v in c.finalists]
            ready = tuple(p for p in places if p is not None)
            close.append(  # the group's first kernel: the one its bench compiled
                incontext.Finalists(
                    h, kernels[0], c.finalists, ready if len(ready) == len(places) else ()
                )
            )
    decided, todo = incontext.from_database(db, device, close)
    if todo and survey is not None and model is not None and time.monotonic() < deadline:
        if progress:
            progress("building the model as chosen", 0, 1)
        if rest:  # every kernel in its chosen variant, as the model will run
            more = survey.extended(rest, checked=True)
            if isinstance(more, CallBench):
                runs.update({n: (v, incontext.Compiled(more, 0)) for n, (v,) in rest.items()})
        decided.update(incontext.measure(sched, todo, runs, db, device, deadline, progress))
    for h, d in decided.items():
        chosen[h] = dataclasses.replace(chosen[h], variant=d.variant, in_model=d.seconds)


def _choice(
    sched: Schedule,
    h: str,
    kernels: list[Kernel],
    variant: Variant,
    source: str,
    seconds: float | None,
    default_seconds: float | None,
    candidates: int,
    measured: int,
    tau: float | None,
) -> KernelChoice:
    k = kernels[0]
    return KernelChoice(
        k.name,
        h,
        k.kind,
        _shape(sched, k),
        len(kernels),
        variant,
        source,
        seconds,
        default_seconds,
        candidates,
        measured,
        tau,
    )


def _shape(sched: Schedule, k: Kernel) -> str:
    return "x".join(map(str, sched.graph.nodes[k.node].shape)) or "scalar"
