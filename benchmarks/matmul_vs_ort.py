"""The public suite's large matrix products alone, luminal against ONNX Runtime: how far a
compute-bound model's time can fall by its GEMM kernels.

    python -m benchmarks.matmul_vs_ort                         # every shape, all CPUs
    python -m benchmarks.matmul_vs_ort --shapes vit_fc2,bert_ffn1 --threads 1
    python -m benchmarks.matmul_vs_ort --duration 10 --json matmul.json

Each shape is one ONNX graph, X [M, K] @ W [K, N] + b with seeded random weights (the
products of ViT-S/16's and BERT-base's layers at 197 and 128 tokens, and BERT's at batch
8).  luminal compiles it as `luminal compile` does (search budget `--budget`, default the
CLI's, a fresh tuning database); both arms are timed interleaved through the bench harness
(`compare.time_arms`: warm-up, shuffled rounds of ~50 ms blocks, a pause before each) at
the same thread count, and luminal's output is checked against ORT's first
(`references.parity`).  Stop 48 measured (2 threads, AMD EPYC Zen 4): every shape at
0.94-0.98x ORT's time, luminal at 197-218 GFLOP/s against the search's calibrated peak of
about 230 (2 x 115): a transformer whose time is these products cannot reach 0.8x ORT's
latency by its GEMM kernels alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Shape:
    name: str
    m: int
    k: int
    n: int

    @property
    def gflop(self) -> float:
        return 2 * self.m * self.k * self.n / 1e9


SHAPES = (
    Shape("vit_qkv", 197, 384, 1152),
    Shape("vit_fc1", 197, 384, 1536),
    Shape("vit_fc2", 197, 1536, 384),
    Shape("bert_attn_out", 128, 768, 768),
    Shape("bert_ffn1", 128, 768, 3072),
    Shape("bert_ffn2", 128, 3072, 768),
    Shape("bert8_ffn1", 1024, 768, 3072),
)


@dataclass(frozen=True)
class Row:
    shape: Shape
    ort_ms: float
    luminal_ms: float
    parity_ok: bool
    max_abs: float

    @property
    def ratio(self) -> float:
        return self.luminal_ms / self.ort_ms

    def markdown(self) -> str:
        s = self.shape
        return (
            f"| {s.name} | {s.m}x{s.k} @ {s.k}x{s.n} | {self.ort_ms:.3f} "
            f"({s.gflop / self.ort_ms * 1e3:.0f}) | {self.luminal_ms:.3f} "
            f"({s.gflop / self.luminal_ms * 1e3:.0f}) | {self.ratio:.2f}x "
            f"| {'OK' if self.parity_ok else 'MISMATCH'} ({self.max_abs:.2g}) |"
        )


HEADER = (
    "| shape | product | ORT ms (GFLOP/s) | luminal ms (GFLOP/s) | luminal / ORT | parity |\n"
    "|---|---|---|---|---|---|"
)


def onnx_model(shape: Shape, path: Path, seed: int = 0) -> Path:
    """X @ W + b as an ONNX file: W and b seeded initializers, X the one input."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((shape.k, shape.n)) / np.sqrt(shape.k)).astype(np.float32)
    b = rng.standard_normal(shape.n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
        shape.name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [shape.m, shape.k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape.m, shape.n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def measure(shape: Shape, tmp: Path, threads: int, budget: float | None, settings: Any) -> Row:
    import numpy as np

    import luminal
    from benchmarks.compare import _peer, time_arms
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.pipeline import CompileOptions, compile_model
    from luminal.references.parity import compare

    path = onnx_model(shape, tmp / f"{shape.name}.onnx")
    ort = _peer("onnxruntime", path, threads)
    assert ort is not None, "onnxruntime is a dependency of luminal"
    options = CompileOptions(budget_seconds=budget, tuning_db=str(tmp / "tuning.db"))
    compiled = luminal.load(compile_model(load(path), tmp / f"{shape.name}.lmnl", options).path)
    feeds = {"x": np.random.default_rng(1).standard_normal((shape.m, shape.k), np.float32)}
    parity = compare(compiled.run(feeds), ort(feeds))
    _, stats = time_arms(
        {"onnxruntime": lambda: ort(feeds), "luminal": lambda: compiled.run(feeds)},
        settings,
        "onnxruntime",
    )
    return Row(
        shape,
        stats["onnxruntime"]["median_ms"],
        stats["luminal"]["median_ms"],
        parity.ok,
        parity.max_abs,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.matmul_vs_ort",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    names = [s.name for s in SHAPES]
    parser.add_argument("--shapes", default=",".join(names), help=f"of {', '.join(names)}")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--duration", type=float, default=6.0, help="timed seconds per shape")
    parser.add_argument("--budget", default=None, help="as `luminal compile --budget`")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    unknown = set(args.shapes.split(",")) - set(names)
    if unknown:
        print(
            f"matmul_vs_ort: unknown shape(s) {sorted(unknown)}; expected {names}", file=sys.stderr
        )
        return 2
    chosen = [s for s in SHAPES if s.name in args.shapes.split(",")]

    from benchmarks.licensed import licensed
    from luminal.cli.options import parse_budget
    from luminal.compiler.pipeline import DEFAULT_BUDGET_SECONDS
    from luminal.metering.bench.method import MethodSettings

    budget = DEFAULT_BUDGET_SECONDS if args.budget is None else parse_budget(args.budget)
    os.environ["LUMINAL_NUM_THREADS"] = str(args.threads)  # before luminal's pool starts
    settings = MethodSettings(duration_s=args.duration, min_runs=1, min_blocks=10, audit_samples=0)
    rows = []
    print(HEADER)
    with licensed(), tempfile.TemporaryDirectory(prefix="luminal-matmul-") as tmp:
        for shape in chosen:
            print(f"measuring {shape.name} ...", file=sys.stderr, flush=True)
            rows.append(measure(shape, Path(tmp), args.threads, budget, settings))
            print(rows[-1].markdown(), flush=True)
    if args.json:
        payload = [{**asdict(r), "ratio": r.ratio} for r in rows]
        args.json.write_text(
            json.dumps({"threads": args.threads, "rows": payload}, indent=2) + "\n"
        )
    return 0 if all(r.parity_ok for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
