"""Where a compiled suite model spends its time, kernel by kernel.

Each model is compiled with per-kernel timers (`CodegenOptions(profile=True)`: the
library sums every kernel's wall time into `lum_kernel_seconds[]`), run until `--seconds`
have passed, and the top kernels are printed with their kind, shape, FLOPs, bytes moved,
GFLOP/s and share of the model's time.  The FLOP and byte counts are the ones the search's
cost model reads (`schedule.work.cost`).

    python -m benchmarks.profile_kernels                     # every suite model, top 12
    python -m benchmarks.profile_kernels --models cnn --top 40
    python -m benchmarks.profile_kernels --variant k3=blas --variant k5=generated-mr4-nr32

A `--variant KERNEL=LABEL` runs that kernel in another variant (labels as
`Variant.label` prints them: impl, then mr/nr/kc values, then par or seq).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KernelTime:
    name: str
    kind: str
    shape: str
    variant: str
    flops: int
    bytes: int
    seconds: float  # per run


def parse_variant(label: str):  # type: ignore[no-untyped-def]
    """`blas`, `generated-mr4-nr32-kc256-seq`, ... -> Variant."""
    from luminal.compiler.schedule.variant import Variant

    parts = label.split("-")
    fields: dict[str, object] = {"impl": parts[0]}
    for p in parts[1:]:
        if p in ("par", "seq"):
            fields["parallel"] = p == "par"
        else:
            for key in ("mr", "nr", "kc"):
                if p.startswith(key):
                    fields[key] = int(p[len(key) :])
    return Variant(**fields)  # type: ignore[arg-type]


def profile(
    name: str, seconds: float, variants: dict[str, str], tmp: Path
) -> tuple[list[KernelTime], float]:
    """Per-kernel seconds per run, and the whole run's seconds per run (timers included)."""
    from benchmarks.models import build, example_feeds, export_onnx
    from luminal.compiler.backends.cpu import codegen, toolchain
    from luminal.compiler.backends.cpu import variants as cpu_variants
    from luminal.compiler.backends.cpu.native import NativeLibrary
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.hardware import detect_cpu
    from luminal.compiler.schedule import schedule
    from luminal.compiler.schedule.work import cost as kernel_cost

    model = build(name)
    feeds = example_feeds(model)
    sched = schedule(load(export_onnx(model, tmp / f"{name}.onnx")).graph)
    flags, features = toolchain.feature_flags(detect_cpu())
    tc = toolchain.find_toolchain()
    chosen = {k: parse_variant(v) for k, v in variants.items()}
    options = codegen.options_for(features, tc.openmp, profile=True, variants=chosen)
    lib = NativeLibrary.build(sched, options, flags, tc)
    for _ in range(3):
        lib.run(feeds)
    lib.reset_timers()
    runs = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or runs < 3:
        lib.run(feeds)
        runs += 1
    total = (time.perf_counter() - start) / runs
    timers = lib.kernel_seconds()
    result = []
    for k, kernel in enumerate(sched.kernels):
        cost = kernel_cost(sched, kernel)
        v = chosen.get(kernel.name)
        result.append(
            KernelTime(
                kernel.name,
                kernel.kind,
                cpu_variants.describe(sched, kernel),
                v.label if v is not None else "default",
                cost.flops,
                cost.bytes,
                timers[k] / runs,
            )
        )
    return result, total


def report(name: str, kernels: list[KernelTime], total: float, top: int) -> str:
    spent = sum(k.seconds for k in kernels)
    lines = [
        f"## {name}: {total * 1e3:.3f} ms per run, {spent * 1e3:.3f} ms in {len(kernels)} kernels",
        "",
        "| kernel | kind | shape | variant | MFLOP | MB | ms | GFLOP/s | GB/s | share |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_kind: dict[str, float] = {}
    for k in kernels:
        by_kind[k.kind] = by_kind.get(k.kind, 0.0) + k.seconds
    for k in sorted(kernels, key=lambda k: -k.seconds)[:top]:
        s = max(k.seconds, 1e-12)
        lines.append(
            f"| {k.name} | {k.kind} | {k.shape} | {k.variant} | {k.flops / 1e6:.1f} | {k.bytes / 1e6:.2f} "
            f"| {k.seconds * 1e3:.3f} | {k.flops / s / 1e9:.1f} | {k.bytes / s / 1e9:.1f} "
            f"| {k.seconds / max(spent, 1e-12):.0%} |"
        )
    lines.append("")
    lines.append(
        "by kind: "
        + ", ".join(
            f"{kind} {sec * 1e3:.3f} ms ({sec / max(spent, 1e-12):.0%})"
            for kind, sec in sorted(by_kind.items(), key=lambda t: -t[1])
        )
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="mlp,cnn,encoder,gpt")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per model")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument(
        "--variant", action="append", default=[], metavar="KERNEL=LABEL", help="repeatable"
    )
    args = parser.parse_args(argv)
    chosen = dict(v.split("=", 1) for v in args.variant)
    with tempfile.TemporaryDirectory(prefix="luminal-profile-") as tmp:
        for name in args.models.split(","):
            print(f"profiling {name} ...", file=sys.stderr)
            kernels, total = profile(name, args.seconds, chosen, Path(tmp))
            print(report(name, kernels, total, args.top))
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
