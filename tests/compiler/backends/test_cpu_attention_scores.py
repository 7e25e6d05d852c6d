"""Attention's Q.K^T, where both operands are read along the reduction: the register tile
runs along the keys, the axis the scores are stored along (`contraction.plans`' tie-break),
and the key panel is copied in square blocks through an in-register transpose where the
ISA has one (`gemm._pack_transposed`), with the element copy for the k's past the last
whole block and zeros for the columns past a ragged last tile.  Against the reference
interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import luminal
from luminal.compiler.backends.cpu import codegen, simd, toolchain
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.compiler.schedule import schedule

# 2 heads of 40 queries and 40 keys (a ragged last column tile), 24 features per head (one
# whole 16-wide block on AVX-512, then 8 by the element copy)
SHAPE = (1, 2, 40, 24)


def _scores() -> Graph:
    b = GraphBuilder()
    q = b.input("q", SHAPE, DType.F32)
    k = b.input("k", SHAPE, DType.F32)
    return b.build({"s": C.matmul(b, q, b.permute(k, (0, 1, 3, 2)))})


def test_the_tile_runs_along_the_keys_the_scores_are_stored_along() -> None:
    (kernel,) = [k for k in schedule(_scores()).kernels if k.kind == "contraction"]
    plan = kernel.contraction
    assert plan is not None and plan.m is not None
    assert abs(plan.loops.out.coeff(plan.n)) == 1  # n: the keys
    assert abs(plan.loops.out.coeff(plan.m)) == SHAPE[2]  # m: the queries


def test_the_key_panel_is_copied_through_a_transpose_and_the_scores_are_exact(
    tmp_path: Path,
) -> None:
    g = _scores()
    _, features = toolchain.feature_flags(detect_cpu())
    source = codegen.generate(schedule(g), codegen.options_for(features, True))
    if simd.isa_for(features).transpose:
        assert "for (; kt + 16 <= 24; kt += 16)" in source
        assert "for (int64_t kk = kt; kk < 24; kk++)" in source  # the tail, by element
    else:
        assert "kt +" not in source
    rng = np.random.default_rng(3)
    feeds = {n: rng.standard_normal(SHAPE).astype(np.float32) for n in ("q", "k")}
    want = reference.run(g, feeds)["s"]
    np.testing.assert_allclose(want, feeds["q"] @ feeds["k"].transpose(0, 1, 3, 2), rtol=1e-5)
    out = tmp_path / "scores.lmnl"
    compile_model(LoadedModel(g, "test", "test"), out, CompileOptions())
    got = luminal.load(out).run(feeds)["s"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("features", [24, 32, 7])
def test_whole_blocks_only_and_no_block_at_all_are_exact(features: int, tmp_path: Path) -> None:
    shape = (2, 1, 33, features)
    b = GraphBuilder()
    q, k = b.input("q", shape, DType.F32), b.input("k", shape, DType.F32)
    g = b.build({"s": C.matmul(b, q, b.permute(k, (0, 1, 3, 2)))})
    rng = np.random.default_rng(features)
    feeds = {n: rng.standard_normal(shape).astype(np.float32) for n in ("q", "k")}
    out = tmp_path / "scores.lmnl"
    compile_model(LoadedModel(g, "test", "test"), out, CompileOptions())
    got = luminal.load(out).run(feeds)["s"]
    np.testing.assert_allclose(got, reference.run(g, feeds)["s"], rtol=1e-5, atol=1e-5)
