"""Fusion rules: softmax normalisation into the next contraction's epilogue, one-pass
LayerNorm, and horizontal fusion of sibling contractions.  Each test counts scheduled
kernels before and after, and checks values on the reference interpreter."""

from __future__ import annotations

import numpy as np

from luminal.compiler.frontend.compose import contraction as cc
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import norm
from luminal.compiler.ir.builder import GraphBuilder
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph
from luminal.compiler.ir.ops import Op
from luminal.compiler.schedule import schedule
from luminal.compiler.search.rules import fusion
from luminal.compiler.search.saturate import rewrite
from tests.compiler.search.rule_checks import assert_same, fired

RNG = np.random.default_rng(0)


def kernels(graph: Graph) -> int:
    return len(schedule(graph).kernels)


def weight(*shape: int):  # type: ignore[no-untyped-def]
    return (RNG.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


def test_softmax_normalisation_moves_into_the_value_product() -> None:
    b = GraphBuilder()
    q = b.input("q", (16, 8), DType.F32)
    k = b.input("k", (16, 8), DType.F32)
    v = b.input("v", (16, 8), DType.F32)
    p = norm.softmax(b, cc.matmul(b, q, b.permute(k, (1, 0))), 1)
    graph = b.build({"y": cc.matmul(b, p, v)})
    out, report = rewrite(graph)
    assert fired(report, "views-distribute") and fired(report, "view-swap")
    assert kernels(out) < kernels(graph)
    # The normalising multiply runs on the [16, 8] result, not on the [16, 16] weights:
    # nothing multiplies the exponentials any more.
    exps = {i for i, n in enumerate(out.nodes) if n.op is Op.EXP2}
    assert not [n for n in out.nodes if n.op is Op.MUL and exps & set(n.src)]
    assert out.nodes[out.outputs[0][1]].op is Op.MUL
    assert_same(graph, out)


def test_layer_norm_takes_one_pass_over_the_centred_values() -> None:
    b = GraphBuilder()
    x = b.input("x", (8, 64), DType.F32)
    y = norm.layer_norm(b, x, None, None, [1], 1e-5)
    graph = b.build({"y": y})
    out, report = rewrite(graph)
    assert fired(report, "norm-one-pass")
    assert kernels(out) < kernels(graph)
    assert_same(graph, out, rtol=2e-5)


def projections(b: GraphBuilder, x, names: str):  # type: ignore[no-untyped-def]
    out = {}
    for name in names:
        w = b.const(weight(32, 32), name=f"w{name}")
        bias = b.const(weight(32), name=f"b{name}")
        out[name] = m.add(b, cc.matmul(b, x, w), bias)
    return out


def test_sibling_projections_become_one_contraction() -> None:
    """Attention's Q, K, V: three contractions of one input, each read by a further
    contraction, become one contraction (and one bias epilogue) read through slices."""
    b = GraphBuilder()
    x = b.input("x", (8, 32), DType.F32)
    p = projections(b, x, "qkv")
    scores = cc.matmul(b, p["q"], b.permute(p["k"], (1, 0)))
    graph = b.build({"y": cc.matmul(b, scores, p["v"])})
    out, report = rewrite(graph)
    assert fired(report, "horizontal")
    assert any(n.op is Op.SLICE for n in out.nodes)
    assert kernels(out) < kernels(graph)
    assert_same(graph, out)


def test_siblings_with_their_own_epilogues_stay_apart() -> None:
    """Joined, each relu output would need a kernel of its own; apart, each relu is its
    contraction's epilogue.  Extraction keeps them apart."""
    b = GraphBuilder()
    x = b.input("x", (8, 32), DType.F32)
    graph = b.build({k: m.relu(b, v) for k, v in projections(b, x, "qkv").items()})
    out, report = rewrite(graph)
    assert fired(report, "horizontal")
    assert kernels(out) <= kernels(graph)
    assert_same(graph, out)


def test_helpers_reshape_under_expand_and_stack_axis() -> None:
    # [1, 12, 128, 1] broadcast to [1, 12, 128, 128], viewed as [1, 12, 128, 128, 1]
    assert fusion.reshape_under_expand(
        (1, 12, 128, 1), (1, 12, 128, 128), (1, 12, 128, 128, 1)
    ) == (1, 12, 128, 1, 1)
    # a split of a broadcast axis stays broadcast; a split mixing both cannot be expressed
    assert fusion.reshape_under_expand((1, 1, 768), (1, 128, 768), (1, 128, 12, 64)) == (
        1,
        1,
        12,
        64,
    )
    assert fusion.reshape_under_expand((4, 1), (4, 6), (24,)) is None
    # x [M, K, 1] with weights [1, K, N]: join on the N axis
    assert fusion.stack_axis((1, 16, 1), (1, 16, 8), (1, 16, 4), (1,)) == 2
    assert fusion.stack_axis((1, 16, 1), (1, 16, 8), (1, 8, 8), (1,)) == -1
    assert fusion.mean_coefficient((2, 64), (1,), str(-1 / 64))
    assert not fusion.mean_coefficient((2, 64), (1,), "-0.5")
