"""Each suite model's achieved GFLOP/s against this machine's measured peak.

    python -m benchmarks.roofline                    # all four models, markdown table
    python -m benchmarks.roofline --models gpt --budget off --json roofline.json

FLOPs are counted from the compiled schedule (`schedule.work.cost`: two per
multiply-add of a contraction, plus the elementwise work inlined into each kernel);
the peak is the search's calibration of this CPU (`compiler.profile.roofline_machine`, kept
in the tuning database, the one `luminal profile` reads: an FMA loop on one core times the
cores, and a streaming copy).  Latency is the median of repeated runs after a
warm-up.  `% of peak` near 100 means the model is compute-bound and the kernels are
good; a model far below both roofs spends its time on overheads (threads, small kernels).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def measure(name: str, budget: float | None, seconds: float) -> tuple[dict[str, Any], Any]:
    """The model's row, and the machine it was judged against."""
    import numpy as np

    import luminal
    from benchmarks.models import build, example_feeds, export_onnx
    from luminal.compiler.backends.protocol import Request
    from luminal.compiler.backends.target import resolve
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.pipeline import CompileOptions, compile_model
    from luminal.compiler.profile import roofline_machine

    model = build(name)
    feeds = example_feeds(model)
    with tempfile.TemporaryDirectory(prefix="luminal-roofline-") as tmp:
        path = export_onnx(model, Path(tmp) / f"{name}.onnx")
        loaded = load(path)
        result = compile_model(
            loaded, Path(tmp) / f"{name}.lmnl", CompileOptions(budget_seconds=budget)
        )
        session = luminal.load(result.path)
        for _ in range(3):
            session.run(feeds)
        times = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end or len(times) < 10:
            t0 = time.perf_counter()
            session.run(feeds)
            times.append(time.perf_counter() - t0)
    assert result.schedule is not None
    machine = roofline_machine(resolve("cpu"), Request(result.schedule))
    flops, moved = result.flops, result.bytes_moved  # of the schedule that was compiled
    latency = float(np.median(times))
    peak = machine.peak_gflops * machine.cores
    achieved = flops / latency / 1e9
    intensity = flops / max(moved, 1.0)
    roof = machine.roof_gflops(flops, moved)
    row = {
        "model": name,
        "gflop_per_run": flops / 1e9,
        "mbytes_per_run": moved / 1e6,
        "latency_ms": latency * 1e3,
        "achieved_gflops": achieved,
        "peak_gflops": peak,
        "percent_of_peak": 100 * achieved / peak,
        "intensity_flop_per_byte": intensity,
        "roof_gflops": roof,
        "percent_of_roof": 100 * achieved / roof,
    }
    return row, machine


def markdown(rows: list[dict[str, Any]], machine: Any) -> str:
    lines = [
        f"Machine: {machine.cores} cores, FMA peak {machine.peak_gflops:.1f} GFLOP/s per core "
        f"({machine.peak_gflops * machine.cores:.1f} all cores), copy bandwidth {machine.bandwidth_gbs:.1f} GB/s",
        "",
        "| model | GFLOP/run | latency ms | achieved GFLOP/s | % of peak | FLOP/byte | roofline GFLOP/s | % of roofline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['gflop_per_run']:.3f} | {r['latency_ms']:.3f} | {r['achieved_gflops']:.1f} "
            f"| {r['percent_of_peak']:.1f}% | {r['intensity_flop_per_byte']:.1f} | {r['roof_gflops']:.1f} "
            f"| {r['percent_of_roof']:.1f}% |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="mlp,cnn,encoder,gpt")
    parser.add_argument("--budget", default=None, help="as `luminal compile --budget`")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per model")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from benchmarks.licensed import licensed
    from luminal.cli.options import parse_budget
    from luminal.compiler.pipeline import DEFAULT_BUDGET_SECONDS

    budget = DEFAULT_BUDGET_SECONDS if args.budget is None else parse_budget(args.budget)
    rows = []
    machine = None
    with licensed():  # compile_model is the license gate
        for name in args.models.split(","):
            print(f"measuring {name} ...", file=sys.stderr)
            row, machine = measure(name, budget, args.seconds)
            rows.append(row)
    print(markdown(rows, machine))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine.__dict__, "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
