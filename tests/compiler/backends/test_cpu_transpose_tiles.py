"""An elementwise kernel that reads a buffer transposed (Whisper's GELU of its
channel-major convolution, written time-major) may work in square tiles
(`Variant(impl=codegen.TILED_IMPL)`, `codegen._transpose_tiles`): each tile computed along
the transposed buffer's rows into a local array, vectorized, then stored along the
output's rows (through an in-register transpose where the ISA has one).  Results against
the reference interpreter, on shapes whose tiles are cut short at both edges, in every ISA
this machine runs."""

from __future__ import annotations

import re

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, simd, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.backends.cpu.variants import candidates
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Kernel, Schedule, schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())
_BEST = simd.isa_for(FEATURES)
#: Portable C, and every vector ISA this machine runs (AVX-512: the register transpose).
ISAS = ["", *(i.name for i in (simd.AVX2, simd.AVX512) if i.name and i.width <= _BEST.width)]
TILED = Variant(impl=codegen.TILED_IMPL)


def gelu_transposed(batch: int, channels: int, steps: int) -> Graph:
    """gelu(x + bias) read channel-major, written time-major, plus a positional table."""
    b = GraphBuilder()
    x = b.input("x", (batch, channels, steps), DType.F32)
    bias = b.input("bias", (1, channels, 1), DType.F32)
    pos = b.input("pos", (steps, channels), DType.F32)
    y = b.permute(m.gelu(b, m.add(b, x, bias)), (0, 2, 1))
    return b.build({"y": m.add(b, y, pos)})


def the_kernel(sched: Schedule) -> Kernel:
    (kernel,) = [k for k in sched.kernels if k.kind == "elementwise"]
    return kernel


def source(sched: Schedule, variant: Variant, isa: str = "") -> str:
    options = codegen.options_for(
        FEATURES, True, simd=isa, variants={the_kernel(sched).name: variant}
    )
    return codegen.generate(sched, options).split("static int k", 1)[1]  # after the prelude


def test_a_transposed_read_may_be_computed_in_tiles_along_its_rows() -> None:
    sched = schedule(gelu_transposed(2, 40, 48))
    kernel = the_kernel(sched)
    assert codegen.tiles_legal(sched, kernel)
    assert TILED in candidates(sched, kernel, FEATURES)
    assert "tile" not in source(sched, DEFAULT)  # the default keeps the plain loop
    tiled = source(sched, TILED)
    assert re.search(r"float tile\d+\[256\];", tiled)
    # the tile is filled along the transposed buffer's rows (the output's loop 1)...
    fill = tiled.split("#pragma omp simd", 1)[1].split("}", 1)[0]
    assert "for (int64_t i1_e = 0; i1_e < i1_c; i1_e++)" in fill
    assert re.search(r"p\w+\[\d+\*i0 \+ i1_e \+", fill)  # unit stride in i1_e
    # ...and stored along the output's rows
    store = tiled.split("#pragma omp simd")[2].split("}", 1)[0]
    assert "for (int64_t i2_e = 0; i2_e < i2_c; i2_e++)" in store
    assert re.search(r"out\[.*\] = tile\d+\[16\*i2_e \+ i1_e\];", store)
    # through 16 x 16 register transposes with AVX-512
    assert "LUM_VTRANSPOSE(r);" in source(sched, TILED, "avx512")


def test_reads_along_the_output_rows_are_not_tiled() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 48, 40), DType.F32)
    sched = schedule(b.build({"y": m.gelu(b, m.add(b, x, x))}))
    assert not codegen.tiles_legal(sched, the_kernel(sched))
    assert TILED not in candidates(sched, the_kernel(sched), FEATURES)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(
    "shape",
    [
        (2, 40, 48),  # tiles cut short along the channels
        (1, 16, 16),  # one whole tile
        (3, 19, 37),  # cut short along both
        (1, 130, 17),  # many tiles one way, one short tile the other
    ],
)
def test_tiled_transposes_match_the_reference(shape: tuple[int, int, int], isa: str) -> None:
    batch, channels, steps = shape
    graph = gelu_transposed(*shape)
    sched = schedule(graph)
    options = codegen.options_for(
        FEATURES, True, simd=isa, variants={the_kernel(sched).name: TILED}
    )
    assert "tile" in codegen.generate(sched, options).split("static int k", 1)[1]
    rng = np.random.default_rng(7)
    feeds = {
        "x": rng.standard_normal(shape).astype(np.float32),
        "bias": rng.standard_normal((1, channels, 1)).astype(np.float32),
        "pos": rng.standard_normal((steps, channels)).astype(np.float32),
    }
    feeds["x"][0, channels - 1, steps - 1] = np.nan  # the last tile's last element
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)["y"]
    want = reference.run(graph, feeds)["y"]
    assert got.shape == (batch, steps, channels)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
