"""Arbitrage across local devices: measure prefill and decode on each, run each phase
where the objective says, and move the KV cache between them.

A device here is a worker process pinned to a CPU set (`--cpus 0`, `--cpus 0-1`): its own
thread pool, thread count and caches, loaded with the same decoder artifact.  Its price is
what holding it costs per second: a CPU set holds its cores, so `cpu:0,1` costs 2 and
`cpu:1` costs 1 (core-seconds).  (A GPU or an accelerator plugin is one more worker kind
behind the same four operations, priced by its hour.)

    measure   each device: the prefill of these prompts and one decode step at that
              cache, in `repeats` interleaved rounds (a prefill and 8 steps per device
              per round, the order rotated each round); medians
    transfer  measured between the first and the last device (median of 3): the cache
              serialized on the prefill side in the portable layout
              (`KVCache.to_blocks`: per sequence, layer, K/V and head, contiguous
              `[length, head_dim]` blocks), carried over the pipes, and rebuilt on the
              decode side
    plan      every (prefill device, decode device) pair's predicted end to end,
              prefill + (new - 1) x step + the transfer when the two differ, and cost,
              each phase's time x its device's price (the transfer charged to both);
              `Objective.LATENCY` takes the least end to end, `Objective.COST` the least
              cost among the pairs whose prefill and decode phase (the transfer counted
              in it) each stay within `slack` of that phase on its fastest device
    run       the prefill and first token where the plan says, the cache and the
              sampler's state moved, the remaining steps on the decode device

Prefill is compute-bound and takes what a second core gives; a decode step reads every
weight once and is bound by memory, which the cores share: so under `COST` the planner
keeps prefill on the wide set and moves decode to a narrow one when decode there is
within the slack, and the core it frees serves other work.  The tokens do not depend on
the split: both devices run the same compiled graphs, and the sampler's state travels
with the cache.
"""

from __future__ import annotations

import enum
import multiprocessing
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from luminal.errors import CompilerError, LuminalError, UsageError

__all__ = [
    "DEFAULT_SLACK",
    "Arbitrage",
    "Candidate",
    "Device",
    "DeviceTiming",
    "Objective",
    "Placement",
    "Transfer",
    "Worker",
    "arbitrage",
    "plan",
]

_TIMEOUT_S = 600.0
_STEPS = 8
_TRANSFERS = 3
#: How much slower than its fastest device a phase may run when the objective is cost.
DEFAULT_SLACK = 1.2


@dataclass(frozen=True)
class Device:
    cpus: tuple[int, ...]

    @property
    def name(self) -> str:
        return "cpu:" + ",".join(map(str, self.cpus))

    @property
    def price(self) -> float:
        """What holding the device costs per second: a CPU set holds its cores."""
        return float(len(self.cpus))


@dataclass(frozen=True)
class DeviceTiming:
    device: str
    prefill_s: float  # prefill and first token, median
    step_s: float  # one decode step, median


@dataclass(frozen=True)
class Transfer:
    bytes: int
    seconds: float  # serialize, carry, rebuild


class Objective(enum.Enum):
    """What the planner minimizes over (prefill device, decode device) pairs."""

    LATENCY = "latency"  # the predicted end to end
    COST = "cost"  # device time x price, each phase within the slack of its fastest device


@dataclass(frozen=True)
class Candidate:
    prefill: str
    decode: str
    seconds: float  # predicted end to end
    cost: float  # predicted device time x price (core-seconds for CPU sets)
    admissible: bool  # each phase within the slack (always, for LATENCY)

    def to_json(self) -> dict[str, object]:
        return {
            "prefill": self.prefill,
            "decode": self.decode,
            "predicted_ms": self.seconds * 1e3,
            "cost": self.cost,
            "admissible": self.admissible,
        }


@dataclass(frozen=True)
class Placement:
    prefill: str
    decode: str
    predicted_s: float
    candidates: tuple[Candidate, ...]  # best first
    reason: str
    objective: Objective = Objective.LATENCY

    def to_json(self) -> dict[str, object]:
        return {
            "objective": self.objective.value,
            "prefill": self.prefill,
            "decode": self.decode,
            "predicted_ms": self.predicted_s * 1e3,
            "candidates": [c.to_json() for c in self.candidates],
            "reason": self.reason,
        }


def plan(
    timings: Sequence[DeviceTiming],
    transfer: Transfer,
    new_tokens: int,
    objective: Objective = Objective.LATENCY,
    *,
    slack: float = DEFAULT_SLACK,
    prices: Mapping[str, float] | None = None,
) -> Placement:
    """The best (prefill device, decode device) pair for `objective` (module docstring).
    `prices` maps a device to what holding it costs per second (1 where not given)."""
    _check_slack(slack)
    price = {t.device: (prices or {}).get(t.device, 1.0) for t in timings}
    steps = new_tokens - 1
    fastest_prefill = min(t.prefill_s for t in timings)
    fastest_decode = steps * min(t.step_s for t in timings)

    def candidate(p: DeviceTiming, d: DeviceTiming) -> Candidate:
        move = transfer.seconds if p is not d else 0.0
        decode = steps * d.step_s + move
        cost = price[p.device] * p.prefill_s + price[d.device] * steps * d.step_s
        cost += move * (price[p.device] + price[d.device])  # both are held while it moves
        ok = objective is Objective.LATENCY or (
            p.prefill_s <= slack * fastest_prefill and decode <= slack * fastest_decode
        )
        return Candidate(p.device, d.device, p.prefill_s + decode, cost, ok)

    def key(c: Candidate) -> tuple[bool, float, float]:
        if objective is Objective.COST and c.admissible:
            return (False, c.cost, c.seconds)
        return (objective is Objective.COST, c.seconds, c.cost)  # none admissible: the fastest

    cands = tuple(sorted((candidate(p, d) for p in timings for d in timings), key=key))
    by = {t.device: t for t in timings}
    if objective is Objective.LATENCY:
        reason = _latency_reason(cands, by, transfer, steps)
    else:
        reason = _cost_reason(cands, by, transfer, slack, price)
    best = cands[0]
    return Placement(best.prefill, best.decode, best.seconds, cands, reason, objective)


def _check_slack(slack: float) -> None:
    if slack < 1.0:
        raise UsageError(f"slack {slack:g}: expected 1 or more (1.2 accepts 20% slower)")


def _latency_reason(
    cands: Sequence[Candidate], by: Mapping[str, DeviceTiming], transfer: Transfer, steps: int
) -> str:
    best = cands[0]
    parts = [
        f"prefill on {best.prefill} ({by[best.prefill].prefill_s * 1e3:.2f} ms"
        + "".join(f"; {d} {t.prefill_s * 1e3:.2f}" for d, t in by.items() if d != best.prefill)
        + ")",
        f"decode on {best.decode} ({by[best.decode].step_s * 1e3:.3f} ms/step"
        + "".join(f"; {d} {t.step_s * 1e3:.3f}" for d, t in by.items() if d != best.decode)
        + f", x{steps} steps)",
    ]
    if best.prefill != best.decode:
        single = min((c for c in cands if c.prefill == c.decode), key=lambda c: c.seconds)
        parts.append(
            f"moving the cache costs {transfer.seconds * 1e3:.2f} ms ({transfer.bytes / 1024:.0f} KiB) "
            f"and saves {(single.seconds - best.seconds) * 1e3:.2f} ms against the best single "
            f"device ({single.prefill})"
        )
    else:
        parts.append(
            f"a split would pay {transfer.seconds * 1e3:.2f} ms to move the cache and gains less"
            if len(by) > 1
            else "one device"
        )
    return "; ".join(parts)


def _cost_reason(
    cands: Sequence[Candidate],
    by: Mapping[str, DeviceTiming],
    transfer: Transfer,
    slack: float,
    price: Mapping[str, float],
) -> str:
    """Each phase's device against the others (its time against the fastest, whether the
    slack refused it, its price), then the split's saving against one device alone."""
    best = cands[0]

    def phase(name: str, chosen: str, secs: Mapping[str, float], unit: str) -> str:
        fastest = min(secs.values())
        rows = [
            f"{dev} {s * 1e3:.3f} {unit}, {s / fastest:.2f}x the fastest"
            + (f", over the {slack:.2f}x slack" if s > slack * fastest else "")
            + f", price {price[dev]:g}"
            for dev, s in sorted(secs.items(), key=lambda kv: kv[0] != chosen)
        ]
        return f"{name} on {chosen} ({'; '.join(rows)})"

    parts = [
        f"least device time x price, each phase within {slack:.2f}x of its fastest device",
        phase("prefill", best.prefill, {d: t.prefill_s for d, t in by.items()}, "ms"),
        phase("decode", best.decode, {d: t.step_s for d, t in by.items()}, "ms/step"),
    ]
    if not best.admissible:
        parts.append("no pair keeps both phases within the slack, so the fastest pair")
    if best.prefill == best.decode:
        if len(by) > 1:
            parts.append(
                f"predicted cost {best.cost:.4g}, {best.seconds * 1e3:.1f} ms; every split "
                f"costs more or misses the slack (moving the cache: {transfer.seconds * 1e3:.2f} ms)"
            )
        return "; ".join(parts)
    parts.append(
        f"moving the cache costs {transfer.seconds * 1e3:.2f} ms ({transfer.bytes / 1024:.0f} KiB), "
        "counted in the decode phase"
    )
    alone = [c for c in cands if c.prefill == c.decode and c.admissible]
    if alone:
        one = alone[0]  # sorted: the cheapest single device within the slack
        parts.append(
            f"predicted cost {best.cost:.4g} against {one.cost:.4g} on {one.prefill} alone "
            f"({(1 - best.cost / one.cost) * 100:.0f}% less), "
            f"{best.seconds * 1e3:.1f} against {one.seconds * 1e3:.1f} ms"
        )
    else:
        parts.append(
            f"predicted cost {best.cost:.4g}, {best.seconds * 1e3:.1f} ms; "
            "no single device keeps both phases within the slack"
        )
    return "; ".join(parts)


# -- the worker process --------------------------------------------------------------


@dataclass(frozen=True)
class _Begun:
    token: np.ndarray
    blocks: bytes
    rng_state: dict[str, Any]
    ttft_s: float
    bucket: int
    count: int
    export_s: float


def _serve(conn: Any, artifact: str, cpus: tuple[int, ...]) -> None:
    from luminal.compiler.llm.decoder import load_decoder
    from luminal.metering.bench.environment import apply

    try:
        apply(None, cpus)
        session = load_decoder(Path(artifact))
    except LuminalError as err:
        conn.send(("error", str(err)))
        return
    conn.send(("ok", None))
    while True:
        msg = conn.recv()
        if msg is None:
            session.close()
            return
        op, args = msg
        try:
            conn.send(("ok", _OPS[op](session, *args)))
        except LuminalError as err:
            conn.send(("error", str(err)))


def _begin(session: Any, prompts: list[list[int]], new: int, sampling: Any) -> _Begun:
    start = session.begin(prompts, new, sampling)
    t0 = time.perf_counter()
    blocks = start.cache.to_blocks()
    export = time.perf_counter() - t0
    state = start.rng.bit_generator.state
    return _Begun(start.token, blocks, state, start.ttft_s, start.bucket, start.count, export)


def _finish(session: Any, begun: _Begun, new: int, sampling: Any, eos: int | None) -> Any:
    from luminal.compiler.llm.cache import KVCache
    from luminal.compiler.llm.decoder import Prefilled

    cache = KVCache.from_blocks(begun.blocks, session.plan.capacity)
    rng = np.random.default_rng()
    rng.bit_generator.state = begun.rng_state
    start = Prefilled(begun.token, cache, rng, begun.ttft_s, begun.bucket, begun.count)
    return session.finish(start, new, sampling, eos)


def _import(session: Any, blocks: bytes) -> float:
    from luminal.compiler.llm.cache import KVCache

    t0 = time.perf_counter()
    KVCache.from_blocks(blocks, session.plan.capacity)
    return time.perf_counter() - t0


def _measure(session: Any, prompts: list[list[int]]) -> tuple[float, list[float]]:
    """One prefill and `_STEPS` decode steps after it: (prefill s, [step s])."""
    from luminal.compiler.llm.sampling import Sampling

    greedy = Sampling()
    start = session.begin(prompts, _STEPS + 1, greedy)
    steps = []
    token = start.token
    for _ in range(_STEPS):
        t0 = time.perf_counter()
        logits, _ = session.step(start.cache, token)
        token = greedy.choose(logits, start.rng)
        steps.append(time.perf_counter() - t0)
    return start.ttft_s, steps


def _timings(
    workers: Sequence[Worker], prompts: list[list[int]], rounds: int
) -> tuple[DeviceTiming, ...]:
    """Each device's prefill and decode step, measured in `rounds` interleaved rounds (a
    rotated order each) after a warm-up each, so that a spell of load on this shared
    machine falls on every device alike; medians over the rounds' samples."""
    for w in workers:
        w.call("measure", prompts)  # warm-up
    prefill: dict[str, list[float]] = {w.device.name: [] for w in workers}
    steps: dict[str, list[float]] = {w.device.name: [] for w in workers}
    for r in range(rounds):
        for w in [*workers[r % len(workers) :], *workers[: r % len(workers)]]:
            p, s = w.call("measure", prompts)
            prefill[w.device.name].append(p)
            steps[w.device.name].extend(s)
    return tuple(
        DeviceTiming(
            w.device.name,
            statistics.median(prefill[w.device.name]),
            statistics.median(steps[w.device.name]),
        )
        for w in workers
    )


_OPS = {
    "generate": lambda s, *a: s.generate(*a),
    "begin": _begin,
    "finish": _finish,
    "import": _import,
    "measure": _measure,
}


class Worker:
    """A process pinned to `device` holding the decoder artifact (module docstring)."""

    def __init__(self, device: Device, artifact: Path) -> None:
        self.device = device
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve, args=(child, str(artifact), device.cpus), daemon=True
        )
        self._proc.start()
        child.close()
        self._reply()

    def call(self, op: str, *args: Any) -> Any:
        self._conn.send((op, args))
        return self._reply()

    def _reply(self) -> Any:
        if not self._conn.poll(_TIMEOUT_S):
            self.close()
            raise CompilerError(f"device {self.device.name}: no answer in {_TIMEOUT_S:.0f} s")
        try:
            status, value = self._conn.recv()
        except EOFError:
            raise CompilerError(f"device {self.device.name}: its worker exited") from None
        if status == "error":
            raise UsageError(f"device {self.device.name}: {value}")
        return value

    def close(self) -> None:
        try:
            self._conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.terminate()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Arbitrage:
    timings: tuple[DeviceTiming, ...]
    transfer: Transfer
    placement: Placement
    generation: Any  # decoder.Generation
    moved_bytes: int  # the cache actually moved (0 when both phases ran on one device)
    prices: Mapping[str, float]  # per device
    ran_s: float  # the generation's wall time, the cache's move included

    @property
    def cost(self) -> float:
        """What the run cost: each phase's wall time x its device's price (the move, as
        the plan counts it, charged to both devices)."""
        gen, place = self.generation, self.placement
        p, d = self.prices[place.prefill], self.prices[place.decode]
        rest = max(self.ran_s - gen.e2e_s, 0.0) if place.prefill != place.decode else 0.0
        return p * gen.ttft_s + d * sum(gen.step_s) + (p + d) * rest

    def to_json(self) -> dict[str, object]:
        return {
            "devices": [
                {
                    "device": t.device,
                    "prefill_ms": t.prefill_s * 1e3,
                    "step_ms": t.step_s * 1e3,
                    "price": self.prices[t.device],
                }
                for t in self.timings
            ],
            "transfer": {"bytes": self.transfer.bytes, "ms": self.transfer.seconds * 1e3},
            "placement": self.placement.to_json(),
            "moved_bytes": self.moved_bytes,
            "ran_ms": self.ran_s * 1e3,
            "cost": self.cost,
            **self.generation.to_json(),
        }


def arbitrage(
    artifact: Path,
    devices: Sequence[Device],
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    sampling: Any,
    eos_token_id: int | None = None,
    *,
    repeats: int = 5,
    force: tuple[str, str] | None = None,
    objective: Objective = Objective.LATENCY,
    slack: float = DEFAULT_SLACK,
) -> Arbitrage:
    """Measure, plan for `objective` and generate across `devices` (module docstring).
    `force` runs a given (prefill, decode) pair instead of the plan's (its prediction
    still printed)."""
    if not devices:
        raise UsageError("arbitrage needs at least one device")
    if len({d.name for d in devices}) != len(devices):
        raise UsageError("the same CPU set is named twice")
    prompts = [list(map(int, p)) for p in prompts]
    prices = {d.name: d.price for d in devices}
    _check_slack(slack)  # before any worker starts
    workers = []
    try:
        for d in devices:
            workers.append(Worker(d, artifact))
        timings = _timings(workers, prompts, repeats)
        transfer = _transfer(workers, prompts, max_new_tokens, sampling)
        placement = plan(timings, transfer, max_new_tokens, objective, slack=slack, prices=prices)
        if force is not None:
            names = {w.device.name for w in workers}
            if not set(force) <= names:
                raise UsageError(
                    f"split {force[0]}/{force[1]}: the devices are {', '.join(sorted(names))}"
                )
            forced = next(c for c in placement.candidates if (c.prefill, c.decode) == force)
            reason = (
                f"forced; the plan was prefill on {placement.prefill}, decode on {placement.decode} "
                f"({placement.predicted_s * 1e3:.2f} ms predicted against {forced.seconds * 1e3:.2f} "
                f"ms for the forced pair): {placement.reason}"
            )
            placement = replace(
                placement,
                prefill=force[0],
                decode=force[1],
                predicted_s=forced.seconds,
                reason=reason,
            )
        by = {w.device.name: w for w in workers}
        p, d = by[placement.prefill], by[placement.decode]
        t0 = time.perf_counter()
        if p is d:
            gen, moved = p.call("generate", prompts, max_new_tokens, sampling, eos_token_id), 0
        else:
            begun = p.call("begin", prompts, max_new_tokens, sampling)
            gen, moved = (
                d.call("finish", begun, max_new_tokens, sampling, eos_token_id),
                len(begun.blocks),
            )
        ran = time.perf_counter() - t0
        return Arbitrage(timings, transfer, placement, gen, moved, prices, ran)
    finally:
        for w in workers:
            w.close()


def _transfer(workers: list[Worker], prompts: list[list[int]], new: int, sampling: Any) -> Transfer:
    """A cache moved from the first device to the last, timed end to end minus the
    prefill itself (median of `_TRANSFERS`); with one device, its serialization and
    rebuild alone."""
    src, dst = workers[0], workers[-1]
    seconds = []
    for _ in range(_TRANSFERS):
        t0 = time.perf_counter()
        begun = src.call("begin", prompts, new, sampling)
        out_s = time.perf_counter() - t0 - begun.ttft_s
        t1 = time.perf_counter()
        dst.call("import", begun.blocks)
        seconds.append(out_s + time.perf_counter() - t1)
    return Transfer(len(begun.blocks), statistics.median(seconds))
