"""Where more threads stop paying: every kernel's in-model time on 1 thread and on N.

    python -m benchmarks.thread_scaling --models mobilenet_v2            # 1 vs 2 threads
    python -m benchmarks.thread_scaling model.lmnl --threads 2 --json scaling.json

A model that ties ONNX Runtime on one thread and loses on two (mobilenet_v2 on the 2-core
benchmark machine: 1.00x at 1 thread, 1.13-1.15x at 2) loses in how its kernels scale, and
a kernel timed alone scales differently from the same kernel in the model: there its input
sits in the caches of the cores that wrote it.  So both sides here are `luminal profile`
runs of the whole artifact (`compiler.profile.profile_artifact`: a timer around every
kernel), on 1 thread and on N, alternated `--repeats` times; each kernel's time on a side is
its least over the repeats (the shared machine only ever adds time).

A kernel's *excess* is its time on N threads minus its time on one divided by N: what it
costs beyond perfect scaling.  Rows are sorted by excess, the largest first, and the
summed excess says how far the model is from scaling perfectly.  A kernel slower on N
threads than on one has a speedup below 1.

Model names are built and exported as `benchmarks.profile_vs_ort` does, then compiled
once into a temporary artifact (`--budget`, into an empty tuning database); artifact paths
are profiled as they are.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from luminal.compiler.profile import Profile


@dataclass(frozen=True)
class KernelScaling:
    name: str
    kind: str
    variant: str
    shape: tuple[int, ...]
    one_s: float  # per run on one thread, least over the repeats
    many_s: float  # per run on N threads, least over the repeats

    def excess_s(self, threads: int) -> float:
        """Time on N threads beyond perfect scaling of the one-thread time."""
        return self.many_s - self.one_s / threads

    @property
    def speedup(self) -> float:
        return self.one_s / max(self.many_s, 1e-12)


@dataclass(frozen=True)
class Scaling:
    model: str
    threads: int
    one_s: float  # end to end per run on one thread, least over the repeats
    many_s: float  # and on N threads
    kernels: tuple[KernelScaling, ...]  # by excess, the largest first

    @property
    def speedup(self) -> float:
        return self.one_s / max(self.many_s, 1e-12)

    @property
    def excess_s(self) -> float:
        return sum(k.excess_s(self.threads) for k in self.kernels)

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "threads": self.threads,
            "one_thread_ms": self.one_s * 1e3,
            "many_threads_ms": self.many_s * 1e3,
            "speedup": self.speedup,
            "excess_ms": self.excess_s * 1e3,
            "kernels": [
                {
                    "name": k.name,
                    "kind": k.kind,
                    "variant": k.variant,
                    "shape": list(k.shape),
                    "one_thread_ms": k.one_s * 1e3,
                    "many_threads_ms": k.many_s * 1e3,
                    "speedup": k.speedup,
                    "excess_ms": k.excess_s(self.threads) * 1e3,
                }
                for k in self.kernels
            ],
        }


def scaling(model: str, threads: int, one: Sequence[Profile], many: Sequence[Profile]) -> Scaling:
    """The kernels of profiles of one artifact on one thread (`one`) and on `threads`
    (`many`), each timed at its least over the profiles."""
    if not one or not many:
        raise ValueError("scaling needs at least one profile on each side")
    names = [k.name for k in one[0].kernels]
    for p in (*one, *many):
        if [k.name for k in p.kernels] != names:
            raise ValueError(f"{p.model}: profiles of different schedules")
    rows = []
    for i, k in enumerate(one[0].kernels):
        rows.append(
            KernelScaling(
                k.name,
                k.kind,
                k.variant,
                k.shape,
                min(p.kernels[i].seconds for p in one),
                min(p.kernels[i].seconds for p in many),
            )
        )
    rows.sort(key=lambda r: -r.excess_s(threads))
    return Scaling(
        model,
        threads,
        min(p.end_to_end_seconds for p in one),
        min(p.end_to_end_seconds for p in many),
        tuple(rows),
    )


def report(s: Scaling, top: int) -> str:
    n = s.threads
    lines = [
        f"## {s.model}: 1 thread {s.one_s * 1e3:.3f} ms, {n} threads {s.many_s * 1e3:.3f} ms "
        f"end to end ({s.speedup:.2f}x); kernels' excess over perfect scaling "
        f"{s.excess_s * 1e3:.3f} ms",
        "",
        f"| kernel | kind | variant | shape | 1 thread us | {n} threads us | speedup | excess us |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k in s.kernels[:top] if top else s.kernels:
        lines.append(
            f"| {k.name} | {k.kind} | {k.variant} | {'x'.join(map(str, k.shape))} "
            f"| {k.one_s * 1e6:.1f} | {k.many_s * 1e6:.1f} | {k.speedup:.2f}x "
            f"| {k.excess_s(n) * 1e6:+.1f} |"
        )
    return "\n".join(lines)


def measure(artifact: Path, threads: int, repeats: int, seconds: float) -> Scaling:
    """`repeats` profiles of `artifact` on one thread and on `threads`, alternated."""
    from luminal.compiler.profile import profile_artifact

    one, many = [], []
    for r in range(repeats):
        print(f"  {artifact.name}: repeat {r + 1}/{repeats}", file=sys.stderr, flush=True)
        one.append(profile_artifact(artifact, {}, seconds, 1))
        many.append(profile_artifact(artifact, {}, seconds, threads))
    return scaling(str(artifact), threads, one, many)


def _compiled(name: str, tmp: Path, budget: str) -> Path:
    from benchmarks.compare import export
    from benchmarks.models import build
    from luminal.cli.options import parse_budget
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.options import CompileOptions
    from luminal.compiler.pipeline import compile_model

    print(f"compiling {name} ...", file=sys.stderr, flush=True)
    onnx_path, _ = export(build(name), tmp / f"{name}.onnx")
    options = CompileOptions(budget_seconds=parse_budget(budget), tuning_db=str(tmp / "tuning.db"))
    out = tmp / f"{name}.lmnl"
    compile_model(load(onnx_path), out, options)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("artifacts", nargs="*", type=Path, help="compiled .lmnl files")
    parser.add_argument("--models", default="", help="suite model names, comma-separated")
    parser.add_argument("--threads", type=int, default=2, help="the N compared with 1")
    parser.add_argument("--repeats", type=int, default=3, help="profiles per side")
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per profile")
    parser.add_argument("--budget", default="90s", help="as `luminal compile --budget`")
    parser.add_argument("--top", type=int, default=20, help="kernels shown (0: all)")
    parser.add_argument("--json", type=Path, help="also write every model's table here")
    args = parser.parse_args(argv)
    if args.threads < 2 or args.repeats < 1:
        parser.error("--threads must be at least 2 and --repeats at least 1")
    names = [n for n in args.models.split(",") if n]
    if not names and not args.artifacts:
        parser.error("name artifacts or --models")

    from benchmarks.licensed import licensed
    from luminal.errors import LuminalError
    from luminal.licensing.home import write_atomic

    results = []
    try:
        with licensed(), tempfile.TemporaryDirectory(prefix="luminal-scaling-") as tmp:
            paths = [*args.artifacts, *(_compiled(n, Path(tmp), args.budget) for n in names)]
            for path in paths:
                s = measure(path, args.threads, args.repeats, args.seconds)
                print(report(s, args.top))
                print()
                results.append(s.to_json())
    except LuminalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        write_atomic(args.json, (json.dumps(results, indent=2) + "\n").encode(), 0o644)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
