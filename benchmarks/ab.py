"""Two artifacts of one model, side by side: how much faster is B than A?

    python -m benchmarks.ab before.lmnl after.lmnl                 # markdown row
    python -m benchmarks.ab before.lmnl after.lmnl --duration 20 --json ab.json

What a compiler change buys on a whole model: compile the model with the old tree and
with the new one (each into an empty tuning database), then compare the two artifacts
here.  Separate `benchmarks.compare` runs minutes apart on a shared machine moved
mobilenet_v2's ratio to ONNX Runtime from 1.11x to 1.24x with the same code; pairing the
rounds resolves a 5-10% change on the same machine.

Method: the bench harness (`luminal.metering.bench.method.measure`, the one behind
`luminal bench`; docs/benchmarking.md) with the two artifacts as its arms: warm-up until
the block means settle, then interleaved rounds in a shuffled order, one block of about
50 ms per arm per round, until the paired interval of the speedup is +-2.5% wide or the
cap.  The speedup is A's time over B's (`stats.paired_blocks`: round i of A paired with
round i of B), with its 95% interval.  Both arms get the same inputs (`compiler.inputs`,
seed 0); their outputs must agree within `--atol` (exit 1 otherwise).  Exit 2: the two
artifacts take different inputs, or a file is not an artifact.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from luminal.errors import LuminalError, UsageError
from luminal.metering.bench.method import Arm, Feeds, MethodSettings, measure
from luminal.metering.bench.stats import Ratio, block_means, paired_blocks


@dataclass(frozen=True)
class Comparison:
    a_ms: float  # median block mean
    b_ms: float
    speedup: Ratio  # A's time over B's: > 1 when B is faster
    rounds: int
    max_abs_diff: float

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def compare(
    a: Arm,
    b: Arm,
    feeds: Feeds,
    settings: MethodSettings,
    *,
    clock: Callable[[], int] = time.perf_counter_ns,
    sleep: Callable[[float], None] = time.sleep,
) -> Comparison:
    """A and B timed against each other on `feeds`, their outputs compared first."""
    diff = _max_abs_diff(a(feeds), b(feeds))
    m = measure({"a": a, "b": b}, [feeds], settings, pair=("a", "b"), clock=clock, sleep=sleep)
    blocks = {name: m.arms[name].blocks for name in ("a", "b")}
    return Comparison(
        float(np.median(block_means(blocks["a"]))) / 1e6,
        float(np.median(block_means(blocks["b"]))) / 1e6,
        paired_blocks(blocks["a"], blocks["b"], settings.confidence),
        len(m.order),
        diff,
    )


def _max_abs_diff(x: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray]) -> float:
    """The largest |B - A| over the outputs, by the parity rule's comparison
    (`references.parity.compare_arrays`: NaNs and infinities in other places are inf)."""
    from luminal.references.parity import EXACT, compare_arrays

    if set(x) != set(y):
        raise UsageError(f"the artifacts have different outputs: {sorted(x)} vs {sorted(y)}")
    worst = 0.0
    for name in x:
        o = compare_arrays(name, y[name], x[name], EXACT)
        if o.reason:  # a shape or dtype the other artifact does not have
            raise UsageError(f"output {name!r}: {o.reason} (B against A)")
        worst = max(worst, o.max_abs)
    return worst


def row(a: str, b: str, c: Comparison) -> str:
    s = c.speedup
    return (
        f"| {Path(a).name} | {Path(b).name} | {c.a_ms:.3f} | {c.b_ms:.3f} "
        f"| {s.point:.3f}x [{s.lower:.3f}-{s.upper:.3f}] | {c.rounds} | {c.max_abs_diff:.2g} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ab",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("a", type=Path, help="the artifact to compare against (before)")
    parser.add_argument("b", type=Path, help="the artifact compared (after)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of timed rounds")
    parser.add_argument("--atol", type=float, default=1e-3, help="largest output difference")
    parser.add_argument("--json", type=Path, help="also write the comparison here")
    args = parser.parse_args(argv)

    from luminal.compiler.inputs import random_inputs
    from luminal.compiler.runtime.session import load

    try:
        sa, sb = load(args.a), load(args.b)
        if sa.inputs != sb.inputs:
            raise UsageError(f"{args.a} and {args.b} take different inputs")
        settings = MethodSettings(duration_s=args.duration, target_halfwidth=0.025)
        c = compare(sa.run, sb.run, random_inputs(sa.inputs), settings)
    except LuminalError as err:
        print(f"ab: {err}", file=sys.stderr)
        return 2
    print("| A | B | A ms | B ms | A / B time [95%] | rounds | max abs diff |")
    print("|---|---|---|---|---|---|---|")
    print(row(str(args.a), str(args.b), c))
    if args.json:
        args.json.write_text(json.dumps(c.to_json(), indent=2) + "\n")
    if c.max_abs_diff > args.atol:
        print(f"ab: outputs differ by {c.max_abs_diff:.3g} (> --atol {args.atol})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
