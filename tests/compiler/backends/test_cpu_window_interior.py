"""A short reduction over a padded window (a max or average pool with pads), or an
elementwise kernel reading through a pad fused with other work, runs its
output loops in three ranges each (`codegen._window_interior`): the borders keep the
bounds checks, the interior reads with none, so the loop over outputs vectorizes.  And
`lum_maxf` is written so that GCC vectorizes it inside an `omp simd` loop (a sum over
ReLU values: ResNet's last Add + ReLU + average pool ran scalar and branchy).  Results
against ONNX Runtime and the reference interpreter, NaN included."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import onnx
import pytest

from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx import load
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder, Op
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import schedule
from luminal.references.oracle import run_oracle
from tests.helpers.compiled import compile_and_run
from tests.helpers.onnx_cases import node_model

POOL = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}


def pool_graph(op: str, shape: tuple[int, ...], tmp_path) -> Graph:  # type: ignore[no-untyped-def]
    """One ONNX pool node, saved as tmp_path/pool.onnx and loaded."""
    path = tmp_path / "pool.onnx"
    onnx.save(node_model(op, [np.zeros(shape, np.float32)], POOL), path)
    return load(path).graph


def kernel_source(graph: Graph) -> str:
    return codegen.generate(schedule(graph), codegen.CodegenOptions())


def test_a_padded_pool_splits_its_output_loops_around_an_unchecked_interior(tmp_path) -> None:  # type: ignore[no-untyped-def]
    graph = pool_graph("MaxPool", (1, 4, 12, 10), tmp_path)
    source = kernel_source(graph)
    # rows: the first (reads row -1) and the interior 1..5; columns the same within
    loops = re.findall(r"for \(int64_t (i\d(?:_\d)?) = 0; \1 < (\d+);", source)
    assert loops[0] == ("i1", "4")  # channels: no padding, one loop
    assert loops[1:] == [("i2_0", "1"), ("i3", "5"), ("i2_1", "5"), ("i3_0", "1"), ("i3_1", "4")]
    interior = source.split("i3_1 < 4;")[1].split("out[")[0]
    assert "lum_clamp" not in interior and ">= 0" not in interior  # no check, no clamp
    kernels = source.split("static int k", 1)[1]  # after the prelude
    assert kernels.count("lum_clamp(") == 3  # the first row's two axes, the first column


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("shape", [(1, 3, 9, 9), (2, 2, 8, 11), (1, 1, 3, 3)])
def test_split_pools_match_onnxruntime(op: str, shape: tuple[int, ...], tmp_path) -> None:  # type: ignore[no-untyped-def]
    graph = pool_graph(op, shape, tmp_path)
    x = np.random.default_rng(1).uniform(-3, 3, shape).astype(np.float32)
    got = compile_and_run(graph, {"in0": x}, tmp_path)["out0"]
    want = run_oracle("onnxruntime", tmp_path / "pool.onnx", {"in0": x})["out0"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # NaN anywhere in a window, borders included, is kept as the reference keeps it
    # (ONNX Runtime's pools drop some NaN: not the oracle for this)
    x.flat[::7] = np.nan
    got = compile_and_run(graph, {"in0": x}, tmp_path)["out0"]
    want = reference.run(graph, {"in0": x})["out0"]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def relu_sum() -> Graph:
    b = GraphBuilder()
    x = b.input("x", (64, 49), DType.F32)
    bias = b.input("b", (64, 1), DType.F32)
    return b.build({"y": b.reduce(Op.SUM, m.relu(b, m.add(b, x, bias)), (1,))})


def test_a_sum_over_relu_values_vectorizes_and_keeps_nan(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tc = toolchain.find_toolchain()
    if "zig" in tc.name:
        pytest.skip("-fopt-info is GCC's flag")
    graph = relu_sum()
    flags, features = toolchain.feature_flags(detect_cpu())
    source = codegen.generate(schedule(graph), codegen.options_for(features, True))
    assert "#pragma omp simd reduction(+:acc)" in source
    c = tmp_path / "model.c"
    c.write_text(source)
    so = tmp_path / "model.so"
    info = subprocess.run(
        [
            *tc.command,
            *toolchain.BASE_FLAGS,
            *flags,
            "-fopt-info-vec-missed",
            str(c),
            "-o",
            str(so),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    if "-fopt-info" in info and "unrecognized" in info:
        pytest.skip("the compiler does not report its vectorizer")
    assert "control flow in loop" not in info  # lum_maxf's `||` stopped the simd loop

    rng = np.random.default_rng(2)
    feeds = {
        "x": rng.standard_normal((64, 49)).astype(np.float32),
        "b": rng.standard_normal((64, 1)).astype(np.float32),
    }
    feeds["x"][5, 17] = np.nan
    got = compile_and_run(graph, feeds, tmp_path)["y"]
    want = reference.run(graph, feeds)["y"]
    assert np.isnan(got[5]) and np.isnan(want[5])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def transposed_pad() -> Graph:
    """A channels-last map padded for a convolution in NCHW: a pad of a permute, which
    no row copy does (convnext's stem: LayerNorm2d's transpose back, then the pad)."""
    b = GraphBuilder()
    x = b.input("x", (1, 7, 9, 6), DType.F32)  # n, h, w, c
    nchw = b.permute(x, (0, 3, 1, 2))
    return b.build({"y": b.pad(nchw, ((0, 0), (0, 0), (3, 3), (3, 3)))})


def test_an_elementwise_pad_of_a_permute_splits_around_an_unchecked_interior(tmp_path) -> None:  # type: ignore[no-untyped-def]
    graph = transposed_pad()
    kernels = kernel_source(graph).split("static int k", 1)[1]
    loops = re.findall(r"for \(int64_t (i\d(?:_\d)?) = 0; \1 < (\d+);", kernels)
    # 13 rows: 3 above, 7 read, 3 below; 15 columns within each read row: 3, 9, 3
    assert [n for n, _ in loops[1:]] == ["i2_0", "i3", "i2_1", "i3_0", "i3_1", "i3_2", "i2_2", "i3"]
    assert [d for _, d in loops[1:]] == ["3", "15", "7", "3", "9", "3", "3", "15"]
    interior = kernels.split("i3_1 < 9;")[1].split("out[")[0]
    assert "lum_clamp" not in interior and ">= 0" not in interior
    feed = np.random.default_rng(4).standard_normal((1, 7, 9, 6)).astype(np.float32)
    got = compile_and_run(graph, {"x": feed}, tmp_path)["y"]
    np.testing.assert_array_equal(got, reference.run(graph, {"x": feed})["y"])
