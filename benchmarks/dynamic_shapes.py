"""Shape profiles on the public suite: one compile, every size, against ONNX Runtime.

Each model is exported the way users export a serving model, with symbolic axes (text
models: batch and sequence; vision models: batch), and compiled twice with the same
search budget into one tuning database: statically at the opt shape, then as a profile
(`luminal compile --profile`).  Reported per model:

- parity of the profiled artifact against ONNX Runtime on the same dynamic ONNX file at
  every size asked for (text: batch 1, 3, 8 x sequence 17, 64, 128; vision: batch 1, 3, 8);
- latency at the opt shape, profiled vs static vs ONNX Runtime, timed by luminal's bench
  method (interleaved blocks, medians; `benchmarks.compare.time_arms`): the issue's bound
  is profiled within 10% of static;
- latency at a padded size (text: batch 3, sequence 17; vision: batch 3) against ONNX
  Runtime at that size, which is what padding costs;
- compile seconds, static and profiled.

    python -m benchmarks.dynamic_shapes
    python -m benchmarks.dynamic_shapes --models bert,resnet18 --budget 30 --duration 3
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

TEXT_SIZES = [(b, s) for b in (1, 3, 8) for s in (17, 64, 128)]
VISION_SIZES = [(b,) for b in (1, 3, 8)]
DEFAULT_MODELS = "bert,distilbert,gpt2,t5,resnet18"
#: The profiles compiled (opt first in each range), with their buckets.
TEXT_PROFILE = (["batch=1..8:1", "seq=1..128:128"], ["batch=1,8", "seq=32,128"])
VISION_PROFILE = (["batch=1..8:1"], ["batch=1,4,8"])


def _inputs(name: str, sizes: tuple[int, ...], model: Any) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(sum(sizes))
    (x,) = model.example_inputs
    key = model.input_names[0]
    if len(sizes) == 2:
        return {key: rng.integers(0, 1000, sizes).astype(np.int64)}
    return {key: rng.standard_normal((sizes[0], *x.shape[1:])).astype(np.float32)}


def measure(name: str, budget: float | None, duration: float, threads: int) -> dict[str, Any]:
    import luminal
    from benchmarks.compare import _peer, time_arms
    from benchmarks.models import build, export_onnx
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.pipeline import CompileOptions, compile_model
    from luminal.compiler.shapes.build import compile_profiled
    from luminal.compiler.shapes.profile import parse_profile
    from luminal.metering.bench.method import MethodSettings
    from luminal.references.parity import compare

    model = build(name)
    key = model.input_names[0]
    text = model.example_inputs[0].dtype.is_floating_point is False
    axes = {key: {0: "batch", 1: "seq"}} if text else {key: {0: "batch"}}
    specs, buckets = TEXT_PROFILE if text else VISION_PROFILE
    profile = parse_profile(specs, buckets)
    assert profile is not None
    opt = {d.name: d.opt for d in profile.dims}
    sizes = TEXT_SIZES if text else VISION_SIZES
    with tempfile.TemporaryDirectory(prefix="luminal-dyn-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            onnx_path = export_onnx(model, tmp / f"{name}.onnx", dynamic=axes)
            exporter = "torchscript"
        except Exception as err:  # the exporter's own errors have no common base
            print(f"  TorchScript export failed ({type(err).__name__}); dynamo", file=sys.stderr)
            onnx_path = export_onnx(model, tmp / f"{name}.onnx", exporter="dynamo", dynamic=axes)
            exporter = "dynamo"
        options = CompileOptions(budget_seconds=budget, tuning_db=str(tmp / "tuning.db"))
        t0 = time.perf_counter()
        static = compile_model(load(onnx_path, opt), tmp / "static.lmnl", options)
        static_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        profiled = compile_profiled(onnx_path, tmp / "profile.lmnl", profile, {}, options)
        profile_s = time.perf_counter() - t0
        ort = _peer("onnxruntime", onnx_path, threads)
        assert ort is not None
        s_static = luminal.load(static.path, meter=None)
        s_profile = luminal.load(profiled.path, meter=None)
        parity = {}
        for size in sizes:
            feeds = _inputs(name, size, model)
            parity["x".join(map(str, size))] = compare(s_profile.run(feeds), ort(feeds)).to_json()
        settings = MethodSettings(duration_s=duration, min_runs=1, min_blocks=10, audit_samples=0)
        at_opt = _inputs(name, tuple(opt.values()), model)
        _, stats_opt = time_arms(
            {
                "onnxruntime": lambda: ort(at_opt),
                "static": lambda: s_static.run(at_opt),
                "profile": lambda: s_profile.run(at_opt),
            },
            settings,
            "static",
        )
        padded = _inputs(name, (3, 17) if text else (3,), model)
        _, stats_pad = time_arms(
            {"onnxruntime": lambda: ort(padded), "profile": lambda: s_profile.run(padded)},
            settings,
            "onnxruntime",
        )
    return {
        "model": name,
        "exporter": exporter,
        "profile": [d.describe() for d in profile.dims],
        "buckets": {d.name: list(d.buckets) for d in profile.dims},
        "specializations": len(profiled.points),
        "padding_check": profiled.checked_at,
        "parity": parity,
        "opt": {
            arm: {k: v for k, v in s.items() if k != "samples_ms"} for arm, s in stats_opt.items()
        },
        "padded": {
            arm: {k: v for k, v in s.items() if k != "samples_ms"} for arm, s in stats_pad.items()
        },
        "compile_seconds": {"static": round(static_s, 1), "profile": round(profile_s, 1)},
        "artifact_mib": {
            "static": round(static.artifact_bytes / 2**20, 2),
            "profile": round(profiled.artifact_bytes / 2**20, 2),
        },
    }


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| model | profile (buckets) | parity vs ORT (sizes, worst abs err) | opt: static ms | "
        "opt: profile ms | profile / static | opt: ORT ms | padded: profile / ORT | "
        "compile s static / profile |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ok = all(p["ok"] for p in r["parity"].values())
        worst = max(p["max_abs"] for p in r["parity"].values())
        o, pad = r["opt"], r["padded"]
        bucket_text = "; ".join(f"{d} {','.join(map(str, b))}" for d, b in r["buckets"].items())
        lines.append(
            f"| {r['model']} | {' '.join(r['profile'])} ({bucket_text}) | "
            f"{'OK' if ok else 'MISMATCH'} {len(r['parity'])} sizes, {worst:.1e} | "
            f"{o['static']['median_ms']:.3f} | {o['profile']['median_ms']:.3f} | "
            f"{o['profile']['vs_static']:.3f}x | {o['onnxruntime']['median_ms']:.3f} | "
            f"{pad['profile']['vs_onnxruntime']:.2f}x | "
            f"{r['compile_seconds']['static']} / {r['compile_seconds']['profile']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--budget", default="30", help="as `luminal compile --budget`")
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from luminal.cli.options import parse_budget

    os.environ["LUMINAL_NUM_THREADS"] = str(args.threads)
    from benchmarks.licensed import licensed

    results = []
    with licensed():
        for name in args.models.split(","):
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            results.append(measure(name, parse_budget(args.budget), args.duration, args.threads))
            print(markdown(results[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
            if args.json:  # after each model: a later failure keeps the earlier ones
                args.json.write_text(json.dumps(results, indent=2))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
