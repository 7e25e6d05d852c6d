"""int8 models from `onnxruntime.quantization` through luminal, against ONNX Runtime's own
int8 run and its fp32 run.

For each model (the public suite's resnet18 and bert by default, built in code and exported
with `benchmarks.models.export_onnx`) and each quantization:

    qdq   quantize_static, QuantFormat.QDQ         (QuantizeLinear/DequantizeLinear pairs)
    qop   quantize_static, QuantFormat.QOperator   (QLinearConv, com.microsoft QGemm, ...)
    dyn   quantize_dynamic                         (DynamicQuantizeLinear, MatMulInteger, ...)

it reports whether luminal compiles the quantized model (and the error when not), the
kernel kinds of the compiled schedule, parity against ONNX Runtime running the same
quantized file (the parity module's rule, which allows one quantization step on outputs
computed through quantization plus ONNX Runtime's own spread between its optimized and
unoptimized runs of the model: `references.parity`, `references.spread`; the table also
gives the share of elements beyond one step), and the latency of luminal, ORT int8
and ORT fp32, timed as `benchmarks.compare` times (`time_arms`: warm-up, then interleaved
blocks in a shuffled order; the median of block means).

Calibration data for quantize_static is random with a fixed seed (--seed): normal images
for a CNN, token ids below 1000 for a text model, four samples.

    python -m benchmarks.int8                                  # resnet18 and bert, all three
    python -m benchmarks.int8 --models resnet18 --formats qdq,dyn --duration 5
    python -m benchmarks.int8 --no-time --json int8.json       # compile and parity only
    python -m benchmarks.int8 --reduce-range                   # 7-bit weights
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

FORMATS = ("qdq", "qop", "dyn")
ARMS = ("luminal", "ort-int8", "ort-fp32")


class _Calibration:
    """`CalibrationDataReader` over `n` random feeds shaped like `feeds` (fixed seed)."""

    def __init__(self, feeds: dict[str, np.ndarray], n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self._items: Iterator[dict[str, np.ndarray]] = iter(
            [
                {
                    k: rng.standard_normal(v.shape).astype(v.dtype)
                    if v.dtype.kind == "f"
                    else rng.integers(0, 1000, v.shape).astype(v.dtype)
                    for k, v in feeds.items()
                }
                for _ in range(n)
            ]
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._items, None)

    def rewind(self) -> None:  # the reader protocol's optional method; one pass is enough
        pass


def quantize(
    fp32: Path,
    out: Path,
    fmt: str,
    feeds: dict[str, np.ndarray],
    seed: int,
    reduce_range: bool = False,
) -> Path:
    """`fp32` quantized by onnxruntime.quantization as `fmt` (one of FORMATS) into `out`;
    `reduce_range`: 7-bit weights (ORT's advice for CPUs without VNNI, where its u8 x s8
    kernel sums pairs of products in saturating 16-bit lanes)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        quantize_dynamic,
        quantize_static,
    )

    CalibrationDataReader.register(_Calibration)
    if fmt == "dyn":
        quantize_dynamic(fp32, out, reduce_range=reduce_range)
    else:
        qformat = QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator
        quantize_static(
            fp32,
            out,
            _Calibration(feeds, 4, seed),
            quant_format=qformat,
            reduce_range=reduce_range,
        )
    return out


def op_counts(path: Path) -> dict[str, int]:
    """The quantized graph's op types (`domain.op` outside the default domain)."""
    import onnx

    nodes = onnx.load(str(path), load_external_data=False).graph.node
    return dict(
        collections.Counter(f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in nodes)
    )


def _ort(path: Path, threads: int) -> Callable[[dict[str, Any]], Any]:
    from luminal.references.baselines import BaselineOptions, open_baseline

    _, runner = open_baseline("onnxruntime", path, BaselineOptions(threads))
    return runner


def measure_one(
    name: str, fmt: str, tmp: Path, args: argparse.Namespace, budget: float | None
) -> dict[str, Any]:
    import luminal
    from benchmarks.compare import time_arms
    from benchmarks.models import build, example_feeds, export_onnx
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.pipeline import CompileOptions, compile_model
    from luminal.errors import LuminalError
    from luminal.metering.bench.method import MethodSettings
    from luminal.references.parity import compare
    from luminal.references.quant_steps import steps_of_file
    from luminal.references.spread import reference_spread

    model = build(name)
    feeds = example_feeds(model)
    fp32 = tmp / f"{name}.onnx"
    if not fp32.exists():
        export_onnx(model, fp32)
    qpath = quantize(fp32, tmp / f"{name}.{fmt}.onnx", fmt, feeds, args.seed, args.reduce_range)
    row: dict[str, Any] = {"model": name, "format": fmt, "ops": op_counts(qpath)}
    options = CompileOptions(budget_seconds=budget, tuning_db=str(tmp / "tuning.db"))
    t0 = time.perf_counter()
    try:
        result = compile_model(load(qpath), tmp / f"{name}.{fmt}.lmnl", options)
    except LuminalError as err:
        row["error"] = str(err).splitlines()[0]
        return row
    row["compile_seconds"] = round(time.perf_counter() - t0, 2)
    row["kernels"] = result.kernels
    row["kernel_kinds"] = result.kernel_kinds
    compiled = luminal.load(result.path)
    ort_int8, ort_fp32 = _ort(qpath, args.threads), _ort(fp32, args.threads)
    ref = ort_int8(feeds)
    got = compiled.run(feeds)
    steps, spreads = steps_of_file(qpath), reference_spread(qpath, feeds)
    parity = compare(got, ref, steps=steps, spreads=spreads)
    row["parity"] = parity.to_json()
    row["spread"] = spreads  # ORT's optimized against its unoptimized run
    # how often the spread, not the step, decides: elements outside the one-step bound
    stepped = [o for o in compare(got, ref, steps=steps).outputs if o.name in steps]
    total = sum(o.total for o in stepped)
    row["beyond_one_step"] = sum(o.mismatched for o in stepped) / total if total else None
    row["parity_fp32_vs_int8"] = compare(ort_fp32(feeds), ref).max_abs
    if args.time:
        settings = MethodSettings(
            duration_s=args.duration,
            min_runs=1,
            min_blocks=args.min_rounds,
            seed=args.seed,
            audit_samples=0,
        )
        arms = {
            "luminal": lambda: compiled.run(feeds),
            "ort-int8": lambda: ort_int8(feeds),
            "ort-fp32": lambda: ort_fp32(feeds),
        }
        row["rounds"], row["arms"] = time_arms(arms, settings, "ort-int8")
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    head = (
        "| model | quant | compiles | kernels (kinds) | parity max abs (allowed: step + ORT spread, "
        "or atol) | beyond 1 step | luminal ms | ORT int8 ms | ORT fp32 ms | luminal / ORT int8 |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['format']} | no: {r['error']} | | | | | | | |")
            continue
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["kernel_kinds"].items()))
        p = r["parity"]
        allowed = [
            f"{o.get('step', 0):.3g} + {o['spread']:.3g}"
            if "spread" in o
            else f"{o.get('step', o['atol']):.3g}"
            for o in p["outputs"]
        ]
        verdict = "ok" if p["ok"] else "FAIL"
        share = r.get("beyond_one_step")
        beyond = "" if share is None else f"{100 * share:.2f}%"
        cells = ["", "", "", ""]
        if "arms" in r:
            a = r["arms"]
            cells = [f"{a[arm]['median_ms']:.2f}" for arm in ARMS]
            cells.append(f"{a['luminal']['vs_ort-int8']:.2f}x")
        lines.append(
            f"| {r['model']} | {r['format']} | yes | {r['kernels']} ({kinds}) "
            f"| {p['max_abs']:.3g} ({', '.join(allowed)}) {verdict} | {beyond} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="resnet18,bert", help="comma-separated suite names")
    parser.add_argument("--formats", default=",".join(FORMATS), help="qdq, qop, dyn")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of timing each")
    parser.add_argument("--min-rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", default="off", help="as `luminal compile --budget`")
    parser.add_argument(
        "--reduce-range", action="store_true", help="7-bit weights (quantize_* reduce_range)"
    )
    parser.add_argument("--no-time", dest="time", action="store_false", help="skip latency")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    from benchmarks.licensed import licensed
    from luminal.cli.options import parse_budget

    budget = parse_budget(args.budget)
    os.environ["LUMINAL_NUM_THREADS"] = str(args.threads)
    rows = []
    with licensed(), tempfile.TemporaryDirectory(prefix="luminal-int8-") as tmp:
        for name in args.models.split(","):
            for fmt in args.formats.split(","):
                print(f"measuring {name} {fmt} ...", file=sys.stderr, flush=True)
                rows.append(measure_one(name, fmt, Path(tmp), args, budget))
    print(markdown(rows))
    if args.json:
        meta = {
            "machine": platform.platform(),
            "threads": args.threads,
            "budget": args.budget,
            "reduce_range": args.reduce_range,
        }
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
