"""A sum or max that reads its input across rows (LayerNorm over the channels of a
channel-major map, ConvNeXt's blocks) accumulates a block of outputs along their row at a
time (`codegen._reduce_columns`): the reduced loops outside, the block's outputs inside
and vectorized, each step one contiguous load, instead of a SIMD reduction whose every lane
was a load from another plane.  Results against the reference interpreter, NaN included."""

from __future__ import annotations

import re

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import schedule

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())


def channel_norm(shape: tuple[int, int, int, int]) -> Graph:
    """LayerNorm over the channels of an NCHW map, read channels-last: (x - mean) / std."""
    b = GraphBuilder()
    x = b.input("x", shape, DType.F32)
    xt = b.permute(x, (0, 2, 3, 1))
    n = m.full(b, 1.0 / shape[1], (1, 1, 1, 1), DType.F32)
    mean = m.mul(b, m.reduce_sum(b, xt, (3,)), n)
    centred = m.sub(b, xt, mean)
    var = m.mul(b, m.reduce_sum(b, m.mul(b, centred, centred), (3,)), n)
    eps = m.full(b, 1e-6, (1, 1, 1, 1), DType.F32)
    return b.build({"y": m.div(b, centred, m.sqrt(b, m.add(b, var, eps)))})


def column_max(shape: tuple[int, ...], axis: int) -> Graph:
    b = GraphBuilder()
    x = b.input("x", shape, DType.F32)
    return b.build({"y": m.relu(b, m.reduce_max(b, x, (axis,)))})


def kernels(graph: Graph) -> str:
    source = codegen.generate(schedule(graph), codegen.options_for(FEATURES, True))
    return source.split("static int k", 1)[1]  # after the prelude


def test_a_norm_over_channels_accumulates_its_rows_in_blocks() -> None:
    source = kernels(channel_norm((1, 24, 5, 56)))
    assert re.search(r"double acc\[56\];", source)  # the whole 56-wide row, a divisor
    # the channels outside, the row's outputs inside, read one plane at a time
    step = source.split("for (int64_t r3 = 0; r3 < 24; r3++) {", 1)[1]
    assert step.lstrip().startswith("#pragma omp simd\n")
    load = step.split("acc[i2_e] =", 1)[0]
    assert re.search(r"p\d+\[56\*i1 \+ i2_e \+ 56\*i2_t \+ 280\*r3\]", load)  # unit stride
    # the variance reads the centred values this graph materializes channels-last: along
    # its rows, so a SIMD reduction still
    assert re.search(r"reduction\(\+:acc\)\n.*\n.*p\d+\[\d+\*i1 \+ 24\*i2 \+ r3\]", source)


def test_a_row_with_no_block_dividing_it_keeps_the_simd_reduction() -> None:
    source = kernels(column_max((2, 37, 197), 1))
    assert "acc[" not in source and "reduction(lum_maxf:acc)" in source


@pytest.mark.parametrize(
    ("graph", "shape"),
    [
        (channel_norm((1, 24, 5, 56)), (1, 24, 5, 56)),
        (channel_norm((2, 40, 3, 16)), (2, 40, 3, 16)),
        (column_max((2, 37, 24), 1), (2, 37, 24)),
        (column_max((40, 48), 0), (40, 48)),  # the row alone: blocks of 16 for the threads
    ],
    ids=["norm-56", "norm-16", "max", "max-alone"],
)
def test_column_reductions_match_the_reference(graph: Graph, shape: tuple[int, ...]) -> None:
    assert "acc[" in kernels(graph)
    rng = np.random.default_rng(5)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    feeds["x"].flat[7] = np.nan
    got = NativeLibrary.build(schedule(graph), codegen.options_for(FEATURES, True), FLAGS).run(
        feeds
    )["y"]
    want = reference.run(graph, feeds)["y"]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
