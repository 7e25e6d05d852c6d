"""A convolution tile stored into a channel-major (NCHW) output goes through the epilogue
tile and is copied out by channel; a full tile's copy gathers each channel's positions
into one masked vector store where the ISA has them (AVX-512; a full tile through an
in-register transpose, `LUM_VTRANSPOSE`), else it has constant trip counts, which GCC
unrolls and vectorizes (`gemm._store`).  Ragged tiles (the last positions, fewer output
channels than a tile) keep the general copy.  An epilogue that reads a residual runs
on the transposed tile instead.  Against ONNX Runtime."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import helper

from luminal.compiler.backends.cpu import codegen, native, simd, toolchain
from luminal.compiler.frontend.onnx import load
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.schedule import schedule
from luminal.references.oracle import run_oracle
from tests.helpers.compiled import compile_and_run
from tests.helpers.onnx_cases import chain_model, node_model


@pytest.mark.parametrize(("size", "channels"), [(20, 32), (17, 40)])
def test_full_and_ragged_channel_major_tiles_match_onnxruntime(
    size: int, channels: int, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(size)
    x = rng.standard_normal((1, 3, size, size)).astype(np.float32)
    w = rng.standard_normal((channels, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    model = node_model(
        "Conv", [x, w, bias], {"pads": [1, 1, 1, 1], "strides": [2, 2]}, consts=(1, 2)
    )
    path = tmp_path / "conv.onnx"
    onnx.save(model, path)
    graph = load(path).graph
    _, features = toolchain.feature_flags(detect_cpu())
    source = codegen.generate(schedule(graph), codegen.options_for(features, True))
    if "etile" not in source:
        pytest.skip("this CPU's plan stores the convolution by rows")
    assert re.search(r"if \(mr == \d+ && nr == \d+\) \{", source)  # the full tile's copy
    isa = simd.isa_for(features)
    assert ("LUM_VSTOREN(&out[" in source) == bool(isa.storen)
    assert ("LUM_VTRANSPOSE(r);" in source) == bool(isa.transpose)  # full tiles
    got = compile_and_run(graph, {"in0": x}, tmp_path)["out0"]
    want = run_oracle("onnxruntime", path, {"in0": x})["out0"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("size", "channels"), [(20, 32), (17, 40)])
def test_residual_epilogue_runs_transposed_and_matches_onnxruntime(
    size: int, channels: int, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """A channel-major tile whose epilogue adds a residual is transposed first, and the
    epilogue runs along the positions (`gemm._store_transposed`): full and ragged tiles."""
    rng = np.random.default_rng(size + 1)
    x = rng.standard_normal((1, 3, size, size)).astype(np.float32)
    w = rng.standard_normal((channels, 3, 3, 3)).astype(np.float32)
    out_size = (size + 1) // 2
    res = rng.standard_normal((1, channels, out_size, out_size)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Add", ["c", "r"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    model = chain_model(nodes, {"x": x, "r": res}, ["y"], {"w": w})
    path = tmp_path / "conv_residual.onnx"
    onnx.save(model, path)
    graph = load(path).graph
    _, features = toolchain.feature_flags(detect_cpu())
    source = codegen.generate(schedule(graph), codegen.options_for(features, True))
    if "etile" not in source and "ttile" not in source:
        pytest.skip("this CPU's plan stores the convolution by rows")
    assert "ttile[ni * " in source and "etile" not in source
    feeds = {"x": x, "r": res}
    got = compile_and_run(graph, feeds, tmp_path)["y"]
    want = run_oracle("onnxruntime", path, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(
    "avx512f" not in toolchain.feature_flags(detect_cpu())[1], reason="no AVX-512 here"
)
def test_avx512_transpose_matches_numpy() -> None:
    """`LUM_VTRANSPOSE` on a 16 x 16 block of distinct values: lane j of vector i ends in
    lane i of vector j."""
    import ctypes

    flags, _ = toolchain.feature_flags(detect_cpu())
    source = simd.AVX512.macros() + (
        "void lum_test_transpose(float *a) {\n"
        "    __m512 r[16];\n"
        "    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(a + 16 * i);\n"
        "    LUM_VTRANSPOSE(r);\n"
        "    for (int i = 0; i < 16; i++) _mm512_storeu_ps(a + 16 * i, r[i]);\n"
        "}\n"
    )
    lib = native.open_library(
        toolchain.build_shared_library(source, toolchain.find_toolchain(), flags)
    )
    block = np.arange(256, dtype=np.float32).reshape(16, 16)
    got = block.copy()
    lib.lum_test_transpose(got.ctypes.data_as(ctypes.c_void_p))
    np.testing.assert_array_equal(got, block.T)
