"""fp32 vs fp16 vs bf16 builds of the public suite's BERT and ResNet-50, against ONNX Runtime.

Each model is exported once (as benchmarks/compare.py does), compiled at each precision
(`luminal compile --precision`, search budget `--budget` into one fresh tuning database),
and the builds and ONNX Runtime f32 are timed in interleaved rounds through luminal's
benchmark harness (`compare.time_arms`: warm-up, shuffled rounds, block means, medians).
Reported per build: median latency [IQR], against the fp32 build and ONNX Runtime f32,
weight bytes, and the max abs error against ONNX Runtime f32 with the parity verdict
under the build's documented tolerance (`references.parity.precision_tolerance`).

    python -m benchmarks.precision --budget 20
    python -m benchmarks.precision --models bert --duration 5 --json precision.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PRECISIONS = ("fp32", "fp16", "bf16")


def measure(name: str, args: argparse.Namespace, budget: float | None) -> dict[str, Any]:
    import luminal
    from benchmarks.compare import _peer, export, time_arms
    from benchmarks.models import build, example_feeds
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.pipeline import CompileOptions, compile_model
    from luminal.metering.bench.method import MethodSettings
    from luminal.references.parity import compare, precision_tolerance

    settings = MethodSettings(
        duration_s=args.duration, min_runs=1, min_blocks=args.min_rounds, seed=0, audit_samples=0
    )
    with tempfile.TemporaryDirectory(prefix="luminal-precision-") as tmp_:
        tmp = Path(tmp_)
        model = build(name)
        feeds = example_feeds(model)
        onnx_path, _ = export(model, tmp / f"{name}.onnx")
        ort = _peer("onnxruntime", onnx_path, args.threads)
        assert ort is not None
        ref = ort(feeds)
        arms: dict[str, Any] = {"onnxruntime": lambda: ort(feeds)}
        builds: dict[str, Any] = {}
        for p in PRECISIONS:
            options = CompileOptions(
                budget_seconds=budget, tuning_db=str(tmp / "tuning.db"), precision=p
            )
            t0 = time.perf_counter()
            result = compile_model(load(onnx_path), tmp / f"{name}-{p}.lmnl", options)
            seconds = time.perf_counter() - t0
            compiled = luminal.load(result.path)
            parity = compare(compiled.run(feeds), ref, precision_tolerance(p))
            builds[p] = {
                "compile_seconds": round(seconds, 1),
                "weights_bytes": result.weights_bytes,
                "kernels": result.kernels,
                "check": str(result.check),
                "parity": parity.to_json(),
            }
            arms[p] = lambda c=compiled: c.run(feeds)
            print(f"  {name} {p}: compiled in {seconds:.1f}s", file=sys.stderr, flush=True)
        rounds, stats = time_arms(arms, settings, "onnxruntime")
    for p in PRECISIONS:
        stats[p]["vs_fp32"] = stats[p]["median_ms"] / stats["fp32"]["median_ms"]
    return {"model": name, "rounds": rounds, "arms": stats, "builds": builds}


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| model | build | ms [IQR] | vs fp32 build | vs ORT f32 | weights MiB "
        "| max abs err vs ORT f32 | parity |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        a = r["arms"]
        o = a["onnxruntime"]
        lines.append(
            f"| {r['model']} | ORT f32 | {o['median_ms']:.2f} [{o['q1_ms']:.2f}-{o['q3_ms']:.2f}] "
            "| | 1.00x | | | |"
        )
        for p in PRECISIONS:
            s, b = a[p], r["builds"][p]
            par = b["parity"]
            lines.append(
                f"| {r['model']} | luminal {p} | {s['median_ms']:.2f} "
                f"[{s['q1_ms']:.2f}-{s['q3_ms']:.2f}] | {s['vs_fp32']:.2f}x "
                f"| {s['vs_onnxruntime']:.2f}x | {b['weights_bytes'] / 2**20:.1f} "
                f"| {par['max_abs']:.3g} | {'OK' if par['ok'] else 'MISMATCH'} "
                f"(rtol {par['rtol']:g}) |"
            )
    lines.append("")
    lines.append("Median per-run latency over interleaved rounds; < 1x means faster.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="bert,resnet50", help="comma-separated suite names")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of rounds per model")
    parser.add_argument("--min-rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--budget", default="20", help="search budget per build, as --budget")
    parser.add_argument("--json", type=Path, help="also write the results, samples included")
    args = parser.parse_args(argv)
    from luminal.cli.options import parse_budget

    budget = parse_budget(args.budget)
    os.environ["LUMINAL_NUM_THREADS"] = str(args.threads)
    from benchmarks.licensed import licensed

    results = []
    with licensed():
        for name in args.models.split(","):
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            results.append(measure(name, args, budget))
    print(markdown(results))
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
