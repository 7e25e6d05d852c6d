"""What metering costs at inference: the mlp suite model at batch 8, metered and not.

Method: one compiled artifact, loaded once with `luminal.load(path)` as a customer runs it
(counted, flushed to a ledger in a temporary home every `--interval` seconds: 1 s by
default, 60 times the product's rate, so flushes fall inside the measurement), and a
second `Session` on the same loaded executable without a meter (two loads of one library
differ by more than metering does: code and arena placement), so the arms differ only in
metering.  Both are warmed up, then run in
interleaved rounds, the two arms in a shuffled order each round, one timed block of
`--block-ms` per arm per round.  A sample is a block's mean time per call.  We report each
arm's median and interquartile range, and the overhead as the median of the per-round
ratios metered/unmetered minus 1, with that ratio's interquartile range (pairing by round
cancels the machine's drift).  The issue's bound: overhead at most 1%.  On a noisy machine
that interval is wider than the bound, so the instrumentation is also timed alone (the
clock reads and the counter's add in a loop) and reported as a share of a call.

    python -m benchmarks.metering_overhead                    # ~30 s: 600 rounds of 2x20 ms
    python -m benchmarks.metering_overhead --rounds 400 --json overhead.json

Compiles under this install's license, or a temporary evaluation one when there is none
(`benchmarks/licensed.py`), as `benchmarks.compare` does.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _block(run: Callable[[], object], seconds: float, calls: int) -> float:
    """Mean seconds per call over `calls` calls (chosen so a block lasts about `seconds`)."""
    t0 = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - t0) / calls


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def measure(rounds: int, block_ms: float, interval_s: float, budget: str) -> dict[str, Any]:
    import luminal
    from benchmarks.models import build, example_feeds, export_onnx
    from luminal.cli.options import parse_budget
    from luminal.compiler.frontend import load_model
    from luminal.compiler.options import CompileOptions
    from luminal.compiler.pipeline import compile_model
    from luminal.compiler.runtime import Session
    from luminal.licensing.home import Home
    from luminal.metering.ledger import Ledger, RecordKind
    from luminal.metering.usage import MeterConfig

    tmp = Path(tempfile.mkdtemp(prefix="metering-overhead-"))
    model = build("mlp")
    feeds = example_feeds(model)
    onnx_path = export_onnx(model, tmp / "mlp.onnx")
    artifact = tmp / "mlp.lmnl"
    compile_model(
        load_model(onnx_path, {}), artifact, CompileOptions(budget_seconds=parse_budget(budget))
    )
    home = Home(tmp / "home")
    metered = luminal.load(artifact, meter=MeterConfig(interval_s=interval_s, home=home))
    # the same loaded executable without a meter: only the metering differs between arms
    plain = Session(metered.path, metered.manifest, metered.executable, metered.backend)
    arms = {"metered": lambda: metered.run(feeds), "unmetered": lambda: plain.run(feeds)}
    for run in arms.values():  # warm-up, and the calls a block needs
        _block(run, 0.5, 200)
    per_call = _block(arms["unmetered"], 0.2, 500)
    calls = max(10, int(block_ms / 1e3 / per_call))
    samples: dict[str, list[float]] = {name: [] for name in arms}
    rng = random.Random(0)
    for _ in range(rounds):
        order = list(arms)
        rng.shuffle(order)
        for name in order:
            samples[name].append(_block(arms[name], block_ms / 1e3, calls))
    metered.close()
    added = _instrument_ns(metered)
    ratios = [m / u for m, u in zip(samples["metered"], samples["unmetered"], strict=True)]
    flushed = [r for r in Ledger.of(home).records() if r.kind is RecordKind.USAGE]
    lo, mid, hi = _quartiles(ratios)
    ci = _median_ci(ratios)
    return {
        "model": "mlp",
        "batch": int(next(iter(feeds.values())).shape[0]),
        "rounds": rounds,
        "calls_per_block": calls,
        "flush_interval_s": interval_s,
        "flushes": len(flushed),
        "calls_recorded": sum(int(r.body["calls"]) for r in flushed),
        "arms": {
            name: dict(
                zip(("q1_us", "median_us", "q3_us"), (x * 1e6 for x in _quartiles(xs)), strict=True)
            )
            for name, xs in samples.items()
        },
        "overhead": {
            "median": mid - 1,
            "q1": lo - 1,
            "q3": hi - 1,
            "ci95": [ci[0] - 1, ci[1] - 1],
        },
        "instrumentation_ns": added,
        "instrumentation_share": added * 1e-9 / statistics.median(samples["unmetered"]),
    }


def _instrument_ns(session: Any, n: int = 200_000) -> float:
    """What `Session.run` adds per call when metered, timed alone: the two clock reads and
    the counter's locked add (median of 5 loops of `n`)."""
    from luminal.compiler.runtime.session import _perf_ns

    counter = session.meter.counter
    loops = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            t = _perf_ns()
            counter.add(_perf_ns() - t)
        loops.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(loops)


def _median_ci(xs: list[float], draws: int = 2000) -> tuple[float, float]:
    """A 95% bootstrap interval (percentile) of the median of `xs`, seeded."""
    import numpy as np

    rng = np.random.default_rng(0)
    data = np.asarray(xs)
    medians = np.median(rng.choice(data, size=(draws, data.size)), axis=1)
    return float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def table(result: dict[str, Any]) -> str:
    rows = [
        f"mlp suite model, batch {result['batch']}: {result['rounds']} interleaved rounds, "
        f"{result['calls_per_block']} calls per block; flush every {result['flush_interval_s']} s "
        f"({result['flushes']} flushes recorded {result['calls_recorded']} calls)",
        "",
        "| arm | median µs/call | IQR µs/call |",
        "|-----|---------------:|------------:|",
    ]
    for name, q in result["arms"].items():
        rows.append(f"| {name} | {q['median_us']:.2f} | {q['q1_us']:.2f} .. {q['q3_us']:.2f} |")
    o = result["overhead"]
    rows += [
        "",
        f"overhead (median of per-round ratios - 1): {o['median']:+.2%}, 95% CI "
        f"{o['ci95'][0]:+.2%} .. {o['ci95'][1]:+.2%} (IQR {o['q1']:+.2%} .. {o['q3']:+.2%}); "
        "bound: +1.00%",
        f"instrumentation alone (clock reads + counter add, timed in a loop): "
        f"{result['instrumentation_ns']:.0f} ns/call = {result['instrumentation_share']:.3%} "
        "of the unmetered median",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=600)
    ap.add_argument("--block-ms", type=float, default=20.0)
    ap.add_argument("--interval", type=float, default=1.0, help="flush interval, seconds")
    ap.add_argument("--budget", default="0", help="compile search budget (as luminal compile)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    from benchmarks.licensed import licensed

    with licensed():  # compile_model is the license gate: a temporary evaluation one if none
        result = measure(args.rounds, args.block_ms, args.interval, args.budget)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    # over the bound only when the whole interval is: noise is not overhead
    return 0 if result["overhead"]["ci95"][0] <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
