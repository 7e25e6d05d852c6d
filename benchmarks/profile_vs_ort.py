"""Where luminal loses to ONNX Runtime, kernel by kernel: `luminal profile` beside ORT's
own per-node profile of the same ONNX file, matched by the ONNX nodes each kernel computes.

    python -m benchmarks.profile_vs_ort --models efficientnet_b0 --threads 1
    python -m benchmarks.profile_vs_ort --models mobilenet_v2,resnet50 --top 15 --budget 90

Each of luminal's kernels names the ONNX nodes it came from (`schedule.provenance`); ORT's
profiler (`SessionOptions.enable_profiling`) times each node it ran, named after the node
or, for a node it fused or re-laid out, after the tensor it writes (`r_nchwc` for a Conv +
BN + ReLU writing `r`), with a fusion suffix (`/QuickGeluFusion/`), or a name of its own
(`SkipLayerNormalization_token_3`; ORT's optimized graph, saved beside the profile, says
which tensors that node writes).  An ORT node is charged to the kernel computing the ONNX
node it names, or the node producing a tensor it names or writes; what matches none
(ORT's NCHWc `ReorderInput`/`ReorderOutput`, reshapes it added) is listed by op type.
Both sides are medians of per-run times after a warm-up, at the same thread count.  Rows are sorted by the gap
(luminal - ORT), the largest first: the kernels to work on.  The two sides are timed one
after the other, not interleaved: read the gaps, not the absolute times, on a loaded
machine.  This table found efficientnet_b0's out-of-line `exp2` and its 7-lane pooling
loops (docs/compiler.md).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from luminal.compiler.profile import KernelProfile

#: What ORT appends to the name of a node it fused or re-laid out.
_SUFFIXES = (re.compile(r"_nchwc$"), re.compile(r"/\w+Fusion/?$"))

#: Runs ORT's profile skips before taking medians (its first runs allocate and plan).
ORT_WARMUP = 10


@dataclass(frozen=True)
class OrtNode:
    name: str  # as ORT's profile names it
    op: str
    us: float  # median per run
    outputs: tuple[str, ...] = ()  # the tensors it writes, in ORT's optimized graph


@dataclass(frozen=True)
class Row:
    kernel: str
    kind: str
    variant: str
    nodes: tuple[str, ...]
    luminal_us: float
    ort_us: float  # ORT's time on the ONNX nodes this kernel computes

    @property
    def gap_us(self) -> float:
        return self.luminal_us - self.ort_us


@dataclass(frozen=True)
class Matched:
    rows: tuple[Row, ...]  # in the profile's kernel order
    unmatched: Mapping[str, float]  # ORT op type -> us, for nodes naming no ONNX node


def onnx_name(ort_name: str, producers: Mapping[str, str]) -> str:
    """The ONNX node an ORT profile entry stands for: its suffixes removed, then a tensor
    name taken to the node producing it (`producers`: tensor -> node)."""
    for suffix in _SUFFIXES:
        ort_name = suffix.sub("", ort_name)
    return producers.get(ort_name, ort_name)


def producers(onnx_path: Path) -> dict[str, str]:
    """Tensor name -> the name of the ONNX node writing it (its first output's name for a
    node without one, as `schedule.provenance` names it)."""
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    return {out: node.name or node.output[0] for node in graph.node for out in node.output}


def match(
    kernels: Sequence[KernelProfile], ort: Iterable[OrtNode], tensors: Mapping[str, str]
) -> Matched:
    """Charge each ORT node to the luminal kernel computing the ONNX node it names
    (`tensors`: `producers` of the model)."""
    owner: dict[str, str] = {}
    for k in kernels:
        for node in k.nodes:
            owner.setdefault(node, k.name)
    charged: dict[str, float] = {}
    unmatched: dict[str, float] = {}
    for n in ort:
        named = [n.name, onnx_name(n.name, tensors), *(onnx_name(t, tensors) for t in n.outputs)]
        kernel = next((owner[x] for x in named if x in owner), None)
        if kernel is None:
            unmatched[n.op] = unmatched.get(n.op, 0.0) + n.us
        else:
            charged[kernel] = charged.get(kernel, 0.0) + n.us
    rows = tuple(
        Row(k.name, k.kind, k.variant, k.nodes, k.seconds * 1e6, charged.get(k.name, 0.0))
        for k in kernels
    )
    return Matched(rows, unmatched)


def ort_profile(
    onnx_path: Path,
    feeds: Mapping[str, object],
    threads: int,
    runs: int,
    tensors: Mapping[str, str],
) -> list[OrtNode]:
    """ORT's per-node times (median over `runs` after `ORT_WARMUP`), default provider and
    optimizations, `threads` intra-op threads (`tensors`: `producers` of the model)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="luminal-ortprof-") as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "ort")
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        optimized = Path(tmp) / "optimized.onnx"  # names the tensors each fused node writes
        options.optimized_model_filepath = str(optimized)
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        for _ in range(ORT_WARMUP + runs):
            session.run(None, dict(feeds))
        events = json.loads(Path(session.end_profiling()).read_text())
        writes = _writes(optimized, tensors)
    times: dict[str, list[float]] = {}
    ops: dict[str, str] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][: -len("_kernel_time")]
            times.setdefault(name, []).append(float(e["dur"]))
            ops[name] = e.get("args", {}).get("op_name", "?")
    return [
        OrtNode(name, ops[name], statistics.median(ts[ORT_WARMUP:] or ts), writes.get(name, ()))
        for name, ts in times.items()
    ]


def _writes(optimized: Path, known: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Node name -> the tensors it writes in ORT's optimized graph (empty when ORT did not
    save it).  A node ORT made by fusing (`Gemm`, `SkipLayerNormalization`) has a name of
    its own and may write a tensor of its own too (a Gemm's 2-D result, reshaped after it):
    then the nearest tensors downstream that the source model has (`known`) stand for it."""
    import onnx

    if not optimized.is_file():
        return {}
    nodes = onnx.load(str(optimized), load_external_data=False).graph.node
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for t in node.input:
            readers.setdefault(t, []).append(i)
    out = {}
    for node in nodes:
        found, frontier = [], list(node.output)
        for _ in range(4):  # a few nodes downstream at most
            found = [t for t in frontier if onnx_name(t, {}) in known]
            if found or not frontier:
                break
            frontier = [o for t in frontier for i in readers.get(t, ()) for o in nodes[i].output]
        out[node.name] = tuple(found or node.output)
    return out


def report(model: str, threads: int, m: Matched, top: int) -> str:
    lum = sum(r.luminal_us for r in m.rows)
    ort = sum(r.ort_us for r in m.rows) + sum(m.unmatched.values())
    lines = [
        f"## {model}, {threads} thread(s): luminal kernels {lum / 1e3:.3f} ms, "
        f"ORT nodes {ort / 1e3:.3f} ms",
        "",
        "| kind / variant | luminal ms | ORT ms |",
        "|---|---|---|",
    ]
    kinds: dict[str, list[float]] = {}
    for r in m.rows:
        acc = kinds.setdefault(f"{r.kind} / {r.variant.split('-')[0]}", [0.0, 0.0])
        acc[0] += r.luminal_us
        acc[1] += r.ort_us
    for kind, (a, b) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"| {kind} | {a / 1e3:.3f} | {b / 1e3:.3f} |")
    for op, us in sorted(m.unmatched.items(), key=lambda kv: -kv[1]):
        lines.append(f"| ORT only: {op} | | {us / 1e3:.3f} |")
    lines += [
        "",
        "| kernel | kind | variant | luminal us | ORT us | gap us | first onnx nodes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(m.rows, key=lambda r: -r.gap_us)[:top]:
        nodes = ", ".join(r.nodes[:2]) + (" ..." if len(r.nodes) > 2 else "")
        lines.append(
            f"| {r.kernel} | {r.kind} | {r.variant} | {r.luminal_us:.0f} | {r.ort_us:.0f} "
            f"| {r.gap_us:+.0f} | {nodes} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="efficientnet_b0")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--budget", default="90s", help="as `luminal compile --budget`")
    parser.add_argument("--seconds", type=float, default=4.0, help="luminal's timed seconds")
    parser.add_argument("--ort-runs", type=int, default=30)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)

    from benchmarks.compare import export
    from benchmarks.licensed import licensed
    from benchmarks.models import build, example_feeds
    from luminal.cli.options import parse_budget
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.options import CompileOptions
    from luminal.compiler.profile import profile_model

    with licensed(), tempfile.TemporaryDirectory(prefix="luminal-vs-ort-") as tmp:
        options = CompileOptions(
            budget_seconds=parse_budget(args.budget), tuning_db=str(Path(tmp) / "tuning.db")
        )
        for name in args.models.split(","):
            print(f"profiling {name} ...", file=sys.stderr)
            model = build(name)
            onnx_path, _ = export(model, Path(tmp) / f"{name}.onnx")  # TorchScript, else dynamo
            p = profile_model(load(onnx_path), options, args.seconds, args.threads)
            tensors = producers(onnx_path)
            ort = ort_profile(onnx_path, example_feeds(model), args.threads, args.ort_runs, tensors)
            matched = match(p.kernels, ort, tensors)
            print(report(name, args.threads, matched, args.top))
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
