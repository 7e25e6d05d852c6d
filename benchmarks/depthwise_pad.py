"""One depthwise layer, its pad a kernel of its own against the stencil building the
padded rows from the pad's source (`Variant(impl="stencil", unpad=True)`).

    python -m benchmarks.depthwise_pad                      # the mobilenet layers below
    python -m benchmarks.depthwise_pad --layers 96x112x112/2,384x14x14 --repeats 5

Each layer is a block built here (random weights, fixed seed): a 1x1 expansion from 16
channels with ReLU, writing the depthwise convolution's input, then the padded 3x3
depthwise convolution with ReLU, then a 1x1 projection back to 16.  The depthwise
kernel's two variants are timed by the search's own kernel bench
(`compiler/backends/cpu/bench.py`): the model run up to the kernel on real inputs, each
variant checked against the reference interpreter, then interleaved rounds, where the
variant reading the pad is timed together with the pad's kernel (what the model runs in
its place).  Each repeat is one such measurement; the table gives each variant's medians
over the repeats and their ratio.  Threads: `$LUMINAL_NUM_THREADS` (else every CPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass

import numpy as np

#: mobilenet_v2's and efficientnet_b0's shapes: channels x height x width / stride
LAYERS = "32x112x112,96x112x112/2,144x56x56,144x28x28,384x14x14"


@dataclass(frozen=True)
class Layer:
    channels: int
    height: int
    width: int
    stride: int

    @staticmethod
    def parse(text: str) -> Layer:
        try:
            dims, _, stride = text.partition("/")
            c, h, w = (int(x) for x in dims.split("x"))
            return Layer(c, h, w, int(stride or 1))
        except ValueError:
            raise SystemExit(f"error: layer '{text}' is not CxHxW[/stride]") from None

    def __str__(self) -> str:
        s = f"/{self.stride}" if self.stride > 1 else ""
        return f"{self.channels}x{self.height}x{self.width}{s}"


def _block(layer: Layer):  # type: ignore[no-untyped-def]
    from luminal.compiler.frontend.compose import contraction as C
    from luminal.compiler.frontend.compose import math as m
    from luminal.compiler.ir import DType, GraphBuilder

    rng = np.random.default_rng(5)
    c, s = layer.channels, layer.stride
    b = GraphBuilder()
    x = b.input("x", (1, 16, layer.height, layer.width), DType.F32)

    def weights(*shape: int):  # type: ignore[no-untyped-def]
        return b.const((rng.standard_normal(shape) * 0.4).astype(np.float32))

    none = ((0, 0), (0, 0))
    e = m.relu(b, C.conv(b, x, weights(c, 16, 1, 1), None, (1, 1), none, (1, 1), 1))
    d = C.conv(b, e, weights(c, 1, 3, 3), None, (s, s), ((1, 1), (1, 1)), (1, 1), c)
    y = C.conv(b, m.relu(b, d), weights(16, c, 1, 1), None, (1, 1), none, (1, 1), 1)
    return b.build({"o": y})


def measure(layer: Layer, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds per call of (pad + stencil, unpadded stencil), one pair per repeat."""
    from luminal.compiler.backends.cpu import bench, codegen, stencil, toolchain
    from luminal.compiler.hardware import detect_cpu
    from luminal.compiler.inputs import random_inputs
    from luminal.compiler.schedule import schedule
    from luminal.compiler.schedule.variant import Variant
    from luminal.compiler.search.tuner import Rounds

    flags, features = toolchain.feature_flags(detect_cpu())
    tc = toolchain.find_toolchain()
    sched = schedule(_block(layer))
    k = [k for k in sched.kernels if k.kind == "contraction"][1]
    variants = (Variant(impl=stencil.IMPL), Variant(impl=stencil.IMPL, unpad=True))
    options = codegen.options_for(features, tc.openmp)
    feeds = random_inputs(sched.graph.input_specs())
    lib = bench.build(sched, options, {k.name: variants}, tc, flags, sched.weights_blob(), feeds)
    rounds = Rounds(stop_ratio=1e9, target_seconds=0.2, max_reps=200)
    padded, unpadded = [], []
    for _ in range(repeats):
        a, b = lib.measure(k, variants, [0, 1], rounds=rounds)
        if not (a.ok and b.ok):
            raise SystemExit(f"error: {layer}: a variant disagrees with the reference")
        padded.append(a.seconds)
        unpadded.append(b.seconds)
    return padded, unpadded


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", default=LAYERS, help=f"CxHxW[/stride], comma-separated ({LAYERS})")
    ap.add_argument("--repeats", type=int, default=3, help="measurements per layer")
    args = ap.parse_args(argv)
    from luminal.compiler.backends.cpu import simd, toolchain
    from luminal.compiler.hardware import detect_cpu

    if not simd.isa_for(toolchain.feature_flags(detect_cpu())[1]).loadn:
        print("error: no AVX2 or AVX-512 here: the stencil needs masked loads", file=sys.stderr)
        return 2
    layers = [Layer.parse(t) for t in args.layers.split(",") if t]
    print("| layer | pad + stencil us | unpadded us | speedup |")
    print("|---|---|---|---|")
    for layer in layers:
        print(f"measuring {layer} ...", file=sys.stderr, flush=True)
        padded, unpadded = measure(layer, args.repeats)
        a, b = statistics.median(padded), statistics.median(unpadded)
        print(f"| {layer} | {a * 1e6:.1f} | {b * 1e6:.1f} | {a / b:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
