"""Arbitrage across local devices: measure prefill and decode on each, run each phase
where it is cheapest, and move the KV cache between them.

A device here is a worker process pinned to a CPU set (`--cpus 0`, `--cpus 0-1`): its own
OpenMP pool, thread count and caches, loaded with the same decoder artifact.  (A GPU or
an accelerator plugin is one more worker kind behind the same four operations.)

    measure   each device: the prefill of these prompts (median of `repeats`) and one
              decode step at that cache (median of up to 8 steps)
    transfer  measured once between the first two devices: the cache serialized on the
              prefill side in the portable layout (`KVCache.to_blocks`: per sequence,
              layer, K/V and head, contiguous `[length, head_dim]` blocks), carried over
              the pipes, and rebuilt on the decode side
    plan      every (prefill device, decode device) pair's predicted end to end:
              prefill + (new - 1) x step + the transfer when the two differ; the least
    run       the prefill and first token where the plan says, the cache and the
              sampler's state moved, the remaining steps on the decode device

The tokens do not depend on the split: both devices run the same compiled graphs, and
the sampler's state travels with the cache.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from luminal.errors import CompilerError, LuminalError, UsageError

__all__ = [
    "Arbitrage",
    "Device",
    "DeviceTiming",
    "Placement",
    "Transfer",
    "Worker",
    "arbitrage",
    "plan",
]

_TIMEOUT_S = 600.0
_STEPS = 8


@dataclass(frozen=True)
class Device:
    cpus: tuple[int, ...]

    @property
    def name(self) -> str:
        return "cpu:" + ",".join(map(str, self.cpus))


@dataclass(frozen=True)
class DeviceTiming:
    device: str
    prefill_s: float  # prefill and first token, median
    step_s: float  # one decode step, median


@dataclass(frozen=True)
class Transfer:
    bytes: int
    seconds: float  # serialize, carry, rebuild


@dataclass(frozen=True)
class Placement:
    prefill: str
    decode: str
    predicted_s: float
    candidates: tuple[tuple[str, str, float], ...]  # (prefill, decode, predicted s), best first
    reason: str

    def to_json(self) -> dict[str, object]:
        return {
            "prefill": self.prefill,
            "decode": self.decode,
            "predicted_ms": self.predicted_s * 1e3,
            "candidates": [
                {"prefill": p, "decode": d, "predicted_ms": s * 1e3} for p, d, s in self.candidates
            ],
            "reason": self.reason,
        }


def plan(timings: Sequence[DeviceTiming], transfer: Transfer, new_tokens: int) -> Placement:
    """The least predicted end to end over (prefill device, decode device) pairs."""
    by = {t.device: t for t in timings}
    cands = sorted(
        (
            (
                p.device,
                d.device,
                p.prefill_s
                + (new_tokens - 1) * d.step_s
                + (transfer.seconds if p is not d else 0.0),
            )
            for p in timings
            for d in timings
        ),
        key=lambda c: c[2],
    )
    best_p, best_d, total = cands[0]
    single = min((c for c in cands if c[0] == c[1]), key=lambda c: c[2])
    parts = [
        f"prefill on {best_p} ({by[best_p].prefill_s * 1e3:.2f} ms"
        + "".join(f"; {t.device} {t.prefill_s * 1e3:.2f}" for t in timings if t.device != best_p)
        + ")",
        f"decode on {best_d} ({by[best_d].step_s * 1e3:.3f} ms/step"
        + "".join(f"; {t.device} {t.step_s * 1e3:.3f}" for t in timings if t.device != best_d)
        + f", x{new_tokens - 1} steps)",
    ]
    if best_p != best_d:
        saved = single[2] - total
        parts.append(
            f"moving the cache costs {transfer.seconds * 1e3:.2f} ms ({transfer.bytes / 1024:.0f} KiB) "
            f"and saves {saved * 1e3:.2f} ms against the best single device ({single[0]})"
        )
    else:
        parts.append(
            f"a split would pay {transfer.seconds * 1e3:.2f} ms to move the cache and gains less"
            if len(timings) > 1
            else "one device"
        )
    return Placement(best_p, best_d, total, tuple(cands), "; ".join(parts))


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


def _measure(session: Any, prompts: list[list[int]], repeats: int) -> tuple[float, float]:
    from luminal.compiler.llm.sampling import Sampling

    greedy = Sampling()
    prefill = []
    for _ in range(repeats + 1):  # the first is a warm-up
        prefill.append(session.begin(prompts, 1, greedy).ttft_s)
    start = session.begin(prompts, _STEPS + 1, greedy)
    steps = []
    token = start.token
    for _ in range(_STEPS + 1):
        t0 = time.perf_counter()
        logits, _ = session.step(start.cache, token)
        token = greedy.choose(logits, start.rng)
        steps.append(time.perf_counter() - t0)
    return statistics.median(prefill[1:]), statistics.median(steps[1:])


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

    def to_json(self) -> dict[str, object]:
        return {
            "devices": [
                {"device": t.device, "prefill_ms": t.prefill_s * 1e3, "step_ms": t.step_s * 1e3}
                for t in self.timings
            ],
            "transfer": {"bytes": self.transfer.bytes, "ms": self.transfer.seconds * 1e3},
            "placement": self.placement.to_json(),
            "moved_bytes": self.moved_bytes,
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
) -> Arbitrage:
    """Measure, plan and generate across `devices` (module docstring).  `force` runs a
    given (prefill, decode) pair instead of the plan's (its prediction still printed)."""
    if not devices:
        raise UsageError("arbitrage needs at least one device")
    if len({d.name for d in devices}) != len(devices):
        raise UsageError("the same CPU set is named twice")
    prompts = [list(map(int, p)) for p in prompts]
    workers = []
    try:
        for d in devices:
            workers.append(Worker(d, artifact))
        timings = tuple(
            DeviceTiming(w.device.name, *w.call("measure", prompts, repeats)) for w in workers
        )
        transfer = _transfer(workers, prompts, max_new_tokens, sampling)
        placement = plan(timings, transfer, max_new_tokens)
        if force is not None:
            names = {w.device.name for w in workers}
            if not set(force) <= names:
                raise UsageError(
                    f"split {force[0]}/{force[1]}: the devices are {', '.join(sorted(names))}"
                )
            forced = next(c for c in placement.candidates if c[:2] == force)
            reason = (
                f"forced; the plan was prefill on {placement.prefill}, decode on {placement.decode} "
                f"({placement.predicted_s * 1e3:.2f} ms predicted against {forced[2] * 1e3:.2f} ms "
                f"for the forced pair): {placement.reason}"
            )
            placement = replace(
                placement, prefill=force[0], decode=force[1], predicted_s=forced[2], reason=reason
            )
        by = {w.device.name: w for w in workers}
        p, d = by[placement.prefill], by[placement.decode]
        if p is d:
            gen, moved = p.call("generate", prompts, max_new_tokens, sampling, eos_token_id), 0
        else:
            begun = p.call("begin", prompts, max_new_tokens, sampling)
            gen, moved = (
                d.call("finish", begun, max_new_tokens, sampling, eos_token_id),
                len(begun.blocks),
            )
        return Arbitrage(timings, transfer, placement, gen, moved)
    finally:
        for w in workers:
            w.close()


def _transfer(workers: list[Worker], prompts: list[list[int]], new: int, sampling: Any) -> Transfer:
    """One cache moved from the first device to the second, timed end to end minus the
    prefill itself; with one device, its serialization and rebuild alone."""
    src, dst = workers[0], workers[-1]
    t0 = time.perf_counter()
    begun = src.call("begin", prompts, new, sampling)
    out_s = time.perf_counter() - t0 - begun.ttft_s
    t1 = time.perf_counter()
    dst.call("import", begun.blocks)
    in_s = time.perf_counter() - t1
    return Transfer(len(begun.blocks), out_s + in_s)
