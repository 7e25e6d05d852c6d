"""luminal on an NVIDIA GPU against ONNX Runtime's CUDA provider and PyTorch (CUDA).

For every suite model (`benchmarks/models.py`): export to ONNX, compile it with
`compile_model(..., CompileOptions(target="cuda"))`, load it with `luminal.load`, check
its outputs against ONNX Runtime's CPU provider (the exact f32 reference every other check
of the project uses), then time three arms in interleaved rounds with luminal's benchmark
harness, as `benchmarks/compare.py` does (its `time_arms`: warm-up until steady, a
shuffled order each round, medians of block means):

    onnxruntime-cuda   ORT with the CUDA provider alone (no silent fall-back to the CPU)
    torch-cuda         the eval-mode module on the GPU, under inference_mode
    luminal            the compiled artifact (its CUDA graph replayed)

Every arm is timed host to host: numpy inputs in, numpy outputs out, which is what
luminal's `run` does (copy the inputs in, replay, read the outputs back), so every arm
pays the same transfers.  One markdown table is printed; the exit code is 1 when an
output disagrees with the reference, 2 when there is no NVIDIA GPU (one line says so).

    python -m benchmarks.gpu_check                      # the four models
    python -m benchmarks.gpu_check --models mlp,gpt --duration 5 --json gpu.json
    python -m benchmarks.gpu_check --dry-run            # no GPU: see below

`--dry-run` exercises the whole path on a machine without a GPU: TRITON_INTERPRET=1 makes
the cuda artifact run on CPU tensors in Triton's interpreter, ONNX Runtime's CPU provider
and torch on the CPU stand in for their CUDA arms (same arm names), and only the mlp runs
unless `--models` says otherwise.  Its times mean nothing; its table and parity do.
`benchmarks/gpu_check.sh` installs what this needs and runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ARMS = ("onnxruntime-cuda", "torch-cuda", "luminal")
BASE = ARMS[0]
#: Tolerance against the f32 reference: Triton's f32 accumulation order differs from
#: ORT's, as in the Triton backend's own suite tests (tests/compiler/backends/triton).
RTOL, ATOL = 1e-3, 1e-4
NO_GPU = 2


class NoGpu(Exception):
    """No NVIDIA GPU (or no CUDA build of a package that needs one): one line, exit 2."""


def require_gpu() -> str:
    """The torch device of the NVIDIA GPU, or NoGpu saying what is missing."""
    import onnxruntime as ort
    import torch

    if getattr(torch.version, "hip", None) is not None:
        raise NoGpu(f"torch {torch.__version__} is a ROCm build: this check is for NVIDIA GPUs")
    if not torch.cuda.is_available():
        raise NoGpu(f"no NVIDIA GPU: torch {torch.__version__} sees no CUDA device")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise NoGpu(f"onnxruntime {ort.__version__} has no CUDA provider: install onnxruntime-gpu")
    return "cuda"


def missing_requirements(dry_run: bool) -> list[str]:
    """What this check imports that is not importable here, as pip requirements with the
    versions pyproject.toml allows (luminal's dependencies and its gpu, torch and
    onnxruntime extras); on a GPU run an onnxruntime without the CUDA provider counts as
    missing onnxruntime-gpu.  A package that is present is used as it is."""
    import importlib.util
    import re
    import tomllib

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())[
        "project"
    ]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *extras["gpu"], *extras["torch"], *extras["onnxruntime"]]
    missing = []
    for req in wanted:
        dist = re.split(r"[\s<>=!~\[;]", req, maxsplit=1)[0]
        if dist == "onnxruntime" and not dry_run:
            if not _has_cuda_provider():
                missing.append(req.replace("onnxruntime", "onnxruntime-gpu", 1))
        elif importlib.util.find_spec(dist.lower().replace("-", "_")) is None:
            missing.append(req)
    return missing


def _has_cuda_provider() -> bool:
    try:
        import onnxruntime as ort
    except ImportError:
        return False
    return "CUDAExecutionProvider" in ort.get_available_providers()


def prepare(
    name: str, tmp: Path, device: str, dry_run: bool, budget: float | None = None
) -> tuple[dict[str, Callable[[], Any]], dict[str, Any]]:
    """The three arms of one model, and what was learnt making them (compile time,
    parity of luminal and of torch against the reference)."""
    import onnxruntime as ort
    import torch

    import luminal
    from benchmarks.models import build, example_feeds, export_onnx
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.pipeline import CompileOptions, compile_model
    from luminal.references.parity import Tolerance, compare

    model = build(name)
    feeds = example_feeds(model)
    onnx_path = export_onnx(model, tmp / f"{name}.onnx")
    reference = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    provider = "CPUExecutionProvider" if dry_run else "CUDAExecutionProvider"
    sess = ort.InferenceSession(str(onnx_path), providers=[provider])
    if sess.get_providers()[0] != provider:
        raise NoGpu(f"onnxruntime did not take {provider} (it runs on {sess.get_providers()})")
    t0 = time.perf_counter()
    options = CompileOptions(target="cuda", budget_seconds=budget, tuning_db=str(tmp / "tune.db"))
    result = compile_model(load(onnx_path), tmp / f"{name}.lmnl", options)
    compiled = luminal.load(tmp / f"{name}.lmnl")
    compile_s = time.perf_counter() - t0
    module = model.module.to(device)
    host_args = model.example_inputs

    def run_torch() -> Any:
        with torch.inference_mode():
            out = module(*(a.to(device) for a in host_args))
        return (out[0] if isinstance(out, tuple) else out).cpu().numpy()

    names = [o.name for o in reference.get_outputs()]
    ref = dict(zip(names, reference.run(None, feeds), strict=True))
    got = compiled.run(feeds)
    info = {
        "compile_seconds": round(compile_s, 3),  # compile and load (kernels built at load)
        "measured_kernels": None if result.search is None else result.search.measured,
        "check": None if result.check is None else str(result.check),
        "parity_luminal": compare(got, ref, Tolerance(RTOL, ATOL)).to_json(),
        "parity_torch": compare({names[0]: run_torch()}, ref, Tolerance(RTOL, ATOL)).to_json(),
    }
    arms = {
        "onnxruntime-cuda": lambda: sess.run(None, feeds),
        "torch-cuda": run_torch,
        "luminal": lambda: compiled.run(feeds),
    }
    return arms, info


def measure(
    name: str,
    duration: float,
    min_rounds: int,
    seed: int,
    device: str,
    dry_run: bool,
    budget: float | None = None,
) -> dict[str, Any]:
    from benchmarks.compare import time_arms
    from luminal.metering.bench.method import MethodSettings

    settings = MethodSettings(
        duration_s=duration,
        min_runs=1,
        min_blocks=min_rounds,
        seed=seed,
        audit_samples=0,
        warmup_max_s=min(2.0, duration),  # the 5-minute budget of gpu_check.sh
    )
    with tempfile.TemporaryDirectory(prefix="luminal-gpu-check-") as tmp:
        arms, info = prepare(name, Path(tmp), device, dry_run, budget)
        rounds, stats = time_arms(arms, settings, BASE)
    for arm in stats:
        stats[arm]["vs_torch"] = stats[arm]["median_ms"] / stats["torch-cuda"]["median_ms"]
    return {"model": name, "rounds": rounds, "arms": stats, **info}


def markdown(results: list[dict[str, Any]], dry_run: bool) -> str:
    from benchmarks.compare import geomean

    lines = [
        "| model | ORT-CUDA ms | torch ms | luminal ms | luminal / ORT | luminal / torch | max abs error | compile s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        a, p = r["arms"], r["parity_luminal"]
        ms = {arm: a[arm]["median_ms"] for arm in ARMS}
        ok = "OK" if p["ok"] else "MISMATCH"
        lines.append(
            f"| {r['model']} | {ms[BASE]:.3f} | {ms['torch-cuda']:.3f} | {ms['luminal']:.3f} "
            f"| {a['luminal'][f'vs_{BASE}']:.2f}x | {a['luminal']['vs_torch']:.2f}x "
            f"| {p['max_abs']:.2g} {ok} | {r['compile_seconds']:.1f} "
            f"({r['measured_kernels'] or 0} tuned) |"
        )
    if results:
        ort = geomean([r["arms"]["luminal"][f"vs_{BASE}"] for r in results])
        tor = geomean([r["arms"]["luminal"]["vs_torch"] for r in results])
        lines.append(f"| geomean | | | | {ort:.2f}x | {tor:.2f}x | | |")
    lines.append("")
    lines.append(
        "Median per-run latency over interleaved rounds, host to host; ratio < 1: luminal is "
        f"faster.  Max abs error: luminal against ONNX Runtime's CPU provider (rtol {RTOL}, atol {ATOL})."
    )
    if dry_run:
        lines.append(
            "DRY RUN: Triton's interpreter, ORT's CPU provider and torch on the CPU stood in; "
            "the times mean nothing."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--models", default=None, help="comma-separated (default: all; mlp with --dry-run)"
    )
    parser.add_argument(
        "--duration", type=float, default=3.0, help="seconds of interleaved rounds per model"
    )
    parser.add_argument("--min-rounds", type=int, default=10)
    parser.add_argument(
        "--budget",
        default="20s",
        help="luminal's search budget per model (the GPU tuner times tiles on the device); "
        "'off' compiles with default tiles",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--json", type=Path, help="also write all results, raw samples included, here"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: Triton's interpreter, ORT and torch on the CPU",
    )
    parser.add_argument(
        "--print-missing",
        action="store_true",
        help="only print the pip requirements this check lacks here, one a line (gpu_check.sh)",
    )
    args = parser.parse_args(argv)
    if args.print_missing:
        for requirement in missing_requirements(args.dry_run):
            print(requirement)
        return 0
    # Before anything imports triton: the dry run interprets, a GPU run must not.
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    from benchmarks.models import SUITE_NAMES
    from luminal.cli.options import parse_budget

    budget = parse_budget(args.budget)

    models = (args.models or ("mlp" if args.dry_run else ",".join(SUITE_NAMES))).split(",")
    try:
        device = "cpu" if args.dry_run else require_gpu()
        from benchmarks.licensed import licensed

        results = []
        with licensed(("cuda",)):  # compile_model is the license gate
            for name in models:
                print(f"gpu_check: {name} ...", file=sys.stderr)
                results.append(
                    measure(
                        name,
                        args.duration,
                        args.min_rounds,
                        args.seed,
                        device,
                        args.dry_run,
                        budget,
                    )
                )
    except NoGpu as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return NO_GPU
    print(markdown(results, args.dry_run))
    if args.json:
        args.json.write_text(
            json.dumps({"meta": _meta(device, args.dry_run), "results": results}, indent=2)
        )
    return 0 if all(r["parity_luminal"]["ok"] for r in results) else 1


def _meta(device: str, dry_run: bool) -> dict[str, Any]:
    import onnxruntime as ort
    import torch
    import triton

    import luminal

    gpu = torch.cuda.get_device_name() if device == "cuda" else None
    return {
        "machine": platform.platform(),
        "python": sys.version.split()[0],
        "gpu": gpu,
        "dry_run": dry_run,
        "luminal": str(Path(luminal.__file__).resolve().parent),  # which tree ran
        "versions": {
            "torch": torch.__version__,
            "triton": triton.__version__,
            "onnxruntime": ort.__version__,
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
