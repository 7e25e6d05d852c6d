"""Where each suite model spends its time, kernel by kernel: `luminal profile` over the
suite (`compiler.profile`, the one profiler), printed as markdown.

    python -m benchmarks.profile_kernels                     # every suite model, top 12
    python -m benchmarks.profile_kernels --models cnn --top 40 --budget off
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def report(p, top: int) -> str:  # type: ignore[no-untyped-def]
    """A `compiler.profile.Profile` as a markdown table, slowest kernels first."""
    lines = [
        f"## {Path(p.model).stem}: {p.end_to_end_seconds * 1e3:.3f} ms per run, "
        f"{p.kernel_seconds * 1e3:.3f} ms in {len(p.kernels)} kernels, "
        f"{p.unaccounted_seconds * 1e3:.3f} ms outside them",
        "",
        "| kernel | kind | onnx nodes | variant | MFLOP | MB | ms | GFLOP/s | % roof | share |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in sorted(p.kernels, key=lambda k: -k.seconds)[:top]:
        nodes = ", ".join(k.nodes[:3]) + (" ..." if len(k.nodes) > 3 else "")
        lines.append(
            f"| {k.name} | {k.kind} | {nodes} | {k.variant} | {k.flops / 1e6:.1f} "
            f"| {k.bytes / 1e6:.2f} | {k.seconds * 1e3:.3f} | {k.gflops:.1f} "
            f"| {k.percent_of_roof:.0f}% | {k.share:.0%} |"
        )
    lines += ["", "by kind: " + ", ".join(f"{n} {s * 1e3:.3f} ms" for n, s in p.by_kind().items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="mlp,cnn,encoder,gpt")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per model")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--budget", default="off", help="as `luminal compile --budget`")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

    from benchmarks.licensed import licensed
    from benchmarks.models import build, export_onnx
    from luminal.cli.options import parse_budget
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.options import CompileOptions
    from luminal.compiler.profile import profile_model

    options = CompileOptions(budget_seconds=parse_budget(args.budget))
    with licensed(), tempfile.TemporaryDirectory(prefix="luminal-profile-") as tmp:
        for name in args.models.split(","):
            print(f"profiling {name} ...", file=sys.stderr)
            loaded = load(export_onnx(build(name), Path(tmp) / f"{name}.onnx"))
            print(report(profile_model(loaded, options, args.seconds, args.threads), args.top))
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
