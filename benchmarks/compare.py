"""ONNX Runtime vs OpenVINO vs PyTorch eager vs luminal on the model suites, side by side.

Method: luminal's benchmark harness (`luminal.metering.bench.method`, the one behind
`luminal bench`; docs/benchmarking.md).  Every arm gets the same inputs and the same thread
count; each is warmed up until its last five block means agree within 10%, then the arms
run in interleaved rounds, in a shuffled order each round, one timed block of about 50 ms
per arm per round, until every model has had `--duration` seconds and `--min-rounds`
rounds.  A sample is a block's mean run time.  We report the median latency, the
interquartile range, and each arm's median relative to ONNX Runtime's (ratio of medians).
Outputs of every arm are checked against ONNX Runtime first, by the bench's rule
(`references.parity`, f32: rtol 1e-4, atol 1e-5), widened by how far PyTorch eager itself
is from ONNX Runtime on that output (the rule's `spread`): two references of one model
differ too (ResNet-50 with random weights, 50 layers deep: torch against ORT 4.1e-5 at
outputs of about 0.4), and luminal passes when it is at least as close to ORT as the
model's own framework is (only where torch passes the kernel check against ORT itself, so a
broken torch run widens nothing).  The table says which clause passed it.  OpenVINO (CPU, latency
hint, f32, the same threads) is an arm when the `openvino` extra is installed.

    python -m benchmarks.compare                         # all four models, markdown table
    python -m benchmarks.compare --models public         # the public suite, batch 1 and 8
    python -m benchmarks.compare --models resnet50@8,bert --exporter dynamo
    python -m benchmarks.compare --models mlp,cnn --duration 5 --json results.json
    python -m benchmarks.compare --budget off            # luminal without the search

luminal compiles each model as `luminal compile` does (search budget `--budget`, default
the CLI's) into a fresh tuning database, cold, then again warm (the tuning cache hit);
both compile times are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from luminal.metering.bench.method import MethodSettings

ARMS = ("onnxruntime", "openvino", "torch-eager", "luminal")


def _peer(name: str, onnx_path: Path, threads: int) -> Callable[[dict[str, Any]], Any] | None:
    """The baseline `luminal bench --baseline NAME` times, opened on the ONNX file with the
    same threads; None when its runtime is not installed (OpenVINO is the `openvino` extra)."""
    import importlib.util

    from luminal.references.baselines import BaselineOptions, open_baseline

    if importlib.util.find_spec(name) is None:
        return None
    _, runner = open_baseline(name, onnx_path, BaselineOptions(threads))
    return runner


def export(model: Any, path: Path, exporter: str = "auto") -> tuple[Path, str]:
    """The model exported as asked; `auto` is the TorchScript exporter, or the dynamo one
    for a model the TorchScript exporter cannot export (GPT-2's mask uses aten::diff)."""
    from benchmarks.models import export_onnx

    if exporter != "auto":
        return export_onnx(model, path, exporter=exporter), exporter
    try:
        return export_onnx(model, path), "torchscript"
    except Exception as err:  # the exporter's own errors have no common base
        print(f"  TorchScript export failed ({type(err).__name__}); dynamo", file=sys.stderr)
        return export_onnx(model, path, exporter="dynamo"), "dynamo"


def _spreads(eager: Mapping[str, Any], ref: Mapping[str, Any]) -> dict[str, float]:
    """How far PyTorch eager is from ONNX Runtime, per output both give: the references'
    own disagreement, which the parity rule adds to every element's bound (`spread`).
    Only where torch itself passes the looser kernel check against ORT: a torch run that
    is wrong (an export left in training mode) must not widen luminal's bound."""
    import numpy as np

    from luminal.references.parity import agrees

    spreads = {}
    for name in eager:
        if name not in ref or np.shape(eager[name]) != np.shape(ref[name]):
            continue
        close, worst = agrees(np.asarray(eager[name]), np.asarray(ref[name]))
        if close and np.size(ref[name]):
            spreads[name] = worst
    return spreads


def _parity_cell(r: Mapping[str, Any]) -> str:
    """OK (max abs), with torch's own distance from ORT when only the spread passed it."""
    parity, strict = r["parity_luminal"], r.get("parity_luminal_strict", r["parity_luminal"])
    worst = f"{parity['max_abs']:.2g}"
    if not parity["ok"]:
        return f"MISMATCH ({worst})"
    if strict["ok"]:
        return f"OK ({worst})"
    return f"OK ({worst}; torch {r['parity_torch']['max_abs']:.2g})"


def _prepare(
    name: str, tmp: Path, threads: int, budget: float | None, exporter: str = "auto"
) -> tuple[dict[str, Callable[[], Any]], dict[str, Any]]:
    import torch

    import luminal
    from benchmarks.models import build, example_feeds
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.pipeline import CompileOptions, compile_model
    from luminal.references.parity import compare

    model = build(name)
    feeds = example_feeds(model)
    onnx_path, exported_by = export(model, tmp / f"{name}.onnx", exporter)
    ort = _peer("onnxruntime", onnx_path, threads)
    assert ort is not None, "onnxruntime is a dependency of luminal"
    options = CompileOptions(budget_seconds=budget, tuning_db=str(tmp / "tuning.db"))
    t0 = time.perf_counter()
    result = compile_model(load(onnx_path), tmp / f"{name}.lmnl", options)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm = compile_model(load(onnx_path), tmp / f"{name}.warm.lmnl", options)
    warm_s = time.perf_counter() - t0
    compiled = luminal.load(result.path)
    torch.set_num_threads(threads)
    module, args = model.module, model.example_inputs

    def run_torch() -> Any:
        with torch.inference_mode():
            return module(*args)

    ref = ort(feeds)
    got = compiled.run(feeds)
    with torch.inference_mode():
        eager = module(*args)
    eager_out = {next(iter(ref)): (eager[0] if isinstance(eager, tuple) else eager).numpy()}
    openvino = _peer("openvino", onnx_path, threads)
    info = {
        "exporter": exported_by,
        "compile_seconds": round(compile_s, 3),
        "warm_compile_seconds": round(warm_s, 3),
        "search": None
        if result.search is None
        else {k: v for k, v in result.search.to_json().items() if k != "choices"},
        "warm_cache_hits": None if warm.search is None else warm.search.cache_hits,
        "kernels": result.kernels,
        "arena_bytes": result.arena_bytes,
        "parity_luminal": compare(got, ref, spreads=_spreads(eager_out, ref)).to_json(),
        "parity_luminal_strict": compare(got, ref).to_json(),
        "parity_torch": compare(eager_out, ref).to_json(),
    }
    arms: dict[str, Callable[[], Any]] = {"onnxruntime": lambda: ort(feeds)}
    if openvino is not None:
        info["parity_openvino"] = compare(openvino(feeds), ref).to_json()
        arms["openvino"] = lambda: openvino(feeds)
    arms["torch-eager"] = run_torch
    arms["luminal"] = lambda: compiled.run(feeds)
    return arms, info


def measure(
    name: str,
    duration: float,
    min_rounds: int,
    threads: int,
    seed: int,
    budget: float | None,
    exporter: str = "auto",
) -> dict[str, Any]:
    """The suite model `name` through luminal's benchmark harness (`metering.bench.method`):
    the same warm-up, interleaving and per-run timing as `luminal bench`."""
    from luminal.metering.bench.method import MethodSettings

    settings = MethodSettings(
        duration_s=duration, min_runs=1, min_blocks=min_rounds, seed=seed, audit_samples=0
    )
    with tempfile.TemporaryDirectory(prefix="luminal-bench-") as tmp:
        arms, info = _prepare(name, Path(tmp), threads, budget, exporter)
        rounds, stats = time_arms(arms, settings, "onnxruntime")
    return {"model": name, "rounds": rounds, "arms": stats, **info}


def time_arms(
    arms: Mapping[str, Callable[[], Any]], settings: MethodSettings, base: str
) -> tuple[int, dict[str, dict[str, Any]]]:
    """Interleaved rounds of `arms` (name -> one run) under `settings`: the number of
    rounds, and per arm the median and quartiles of its block means in ms, its raw
    samples, and its median relative to the `base` arm's (`vs_<base>`)."""
    import numpy as np

    from luminal.metering.bench.method import measure as interleave
    from luminal.metering.bench.stats import block_means

    m = interleave({arm: (lambda _feeds, fn=fn: fn()) for arm, fn in arms.items()}, [{}], settings)
    stats = {}
    for arm, rec in m.arms.items():
        xs = block_means(rec.blocks) / 1e6  # ms per run, one sample per block
        q1, median, q3 = (float(v) for v in np.percentile(xs, [25, 50, 75]))
        stats[arm] = {
            "median_ms": median,
            "q1_ms": q1,
            "q3_ms": q3,
            "runs_per_block": rec.runs_per_block,
            "warmup_blocks": len(rec.warmup_blocks),
            "samples_ms": [float(x) for x in xs],
        }
    for arm in stats:
        stats[arm][f"vs_{base}"] = stats[arm]["median_ms"] / stats[base]["median_ms"]
    return len(m.order), stats


def markdown(results: list[dict[str, Any]]) -> str:
    ov = any("openvino" in r["arms"] for r in results)
    peers = ["onnxruntime", *(["openvino"] if ov else []), "torch-eager"]
    heads = {"onnxruntime": "ORT", "openvino": "OpenVINO", "torch-eager": "torch"}
    lines = [
        "| model | "
        + " | ".join(f"{heads[p]} ms" for p in peers)
        + " | luminal ms | "
        + " | ".join(f"luminal / {heads[p]}" for p in peers)
        + " | parity (max abs) | compile s cold / warm |",
        "|---|" + "---|" * (2 * len(peers) + 3),
    ]
    for r in results:
        a = r["arms"]

        def cell(arm: str, a: dict[str, Any] = a) -> str:
            if arm not in a:
                return "-"
            s = a[arm]
            return f"{s['median_ms']:.3f} [{s['q1_ms']:.3f}-{s['q3_ms']:.3f}]"

        def ratio(arm: str, a: dict[str, Any] = a) -> str:
            return f"{a['luminal']['median_ms'] / a[arm]['median_ms']:.2f}x" if arm in a else "-"

        ok = _parity_cell(r)
        lines.append(
            f"| {r['model']} | "
            + " | ".join(cell(p) for p in peers)
            + f" | {cell('luminal')} | "
            + " | ".join(ratio(p) for p in peers)
            + f" | {ok} "
            f"| {r['compile_seconds']:.1f} / {r['warm_compile_seconds']:.1f} |"
        )
    if results:
        means = []
        for p in peers:
            xs = [
                r["arms"]["luminal"]["median_ms"] / r["arms"][p]["median_ms"]
                for r in results
                if p in r["arms"]
            ]
            means.append(f"{geomean(xs):.2f}x" if xs else "-")
        lines.append("| geomean | " + " | " * len(peers) + " | " + " | ".join(means) + " | | |")
    lines.append("")
    lines.append(
        "Median per-run latency [interquartile range] over interleaved rounds; luminal / X < 1 means faster."
    )
    return "\n".join(lines)


def geomean(xs: list[float]) -> float:
    import math

    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def expand(models: str) -> list[str]:
    """`--models`: names, and the groups `suite`, `public`, `public1`."""
    from benchmarks.models import SUITE_NAMES
    from benchmarks.public_models import suite

    groups = {"suite": SUITE_NAMES, "public": suite(), "public1": suite((1,))}
    out: list[str] = []
    for name in models.split(","):
        out.extend(groups.get(name, (name,)))
    return list(dict.fromkeys(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--models",
        default="suite",
        help="comma-separated names; 'suite' is the four, 'public' the public suite at "
        "batch 1 and 8, 'public1' at batch 1 only (python -m benchmarks.models --list)",
    )
    parser.add_argument(
        "--exporter",
        choices=("auto", "torchscript", "dynamo"),
        default="auto",
        help="torch.onnx exporter (auto: TorchScript, dynamo where it cannot export)",
    )
    parser.add_argument(
        "--duration", type=float, default=10.0, help="seconds of interleaved rounds per model"
    )
    parser.add_argument("--min-rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--budget",
        default=None,
        help="luminal's search budget as for `luminal compile --budget` (default: the CLI's); 'off' for none",
    )
    parser.add_argument(
        "--json", type=Path, help="also write all results, raw samples included, here"
    )
    args = parser.parse_args(argv)
    from luminal.cli.options import parse_budget
    from luminal.compiler.pipeline import DEFAULT_BUDGET_SECONDS

    budget = DEFAULT_BUDGET_SECONDS if args.budget is None else parse_budget(args.budget)
    # Same thread count for every arm: luminal's pool reads this when it first runs.
    os.environ["LUMINAL_NUM_THREADS"] = str(args.threads)
    from benchmarks.licensed import licensed

    results = []
    with licensed():  # compile_model is the license gate
        for name in expand(args.models):
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            results.append(
                measure(
                    name,
                    args.duration,
                    args.min_rounds,
                    args.threads,
                    args.seed,
                    budget,
                    args.exporter,
                )
            )
    table = markdown(results)
    print(table)
    if args.json:
        meta = {
            "machine": platform.platform(),
            "python": sys.version.split()[0],
            "threads": args.threads,
            "budget_seconds": budget,
        }
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
