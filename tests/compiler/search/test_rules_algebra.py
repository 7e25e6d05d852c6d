"""Algebra rules: each test builds a small graph where a rule applies, checks in the
report that it fired, that the graph got cheaper in the way the rule promises, and that
the rewritten graph computes what the original did on the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.frontend.compose import contraction as cc
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import norm
from luminal.compiler.ir import interpreter
from luminal.compiler.ir.builder import GraphBuilder, Value
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph
from luminal.compiler.ir.ops import Op
from luminal.compiler.search.saturate import SaturationReport, rewrite
from tests.compiler.search.rule_checks import assert_same, fired

RNG = np.random.default_rng(0)


def count(graph: Graph, op: Op) -> int:
    return sum(node.op is op for node in graph.nodes)


def scalar(b: GraphBuilder, value: float, like: Value) -> Value:
    return m.like(b, value, like)


def algebra_only(graph: Graph) -> tuple[Graph, SaturationReport]:
    return rewrite(graph, families=("algebra",))


def test_literals_fold_and_identities_vanish() -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 8), DType.F32)
    y = b.binary(Op.MUL, b.binary(Op.MUL, x, scalar(b, 0.5, x)), scalar(b, 3.0, x))
    y = b.binary(Op.ADD, y, scalar(b, 0.0, y))
    y = b.binary(Op.MUL, y, scalar(b, 1.0, y))
    graph = b.build({"y": y})
    out, report = algebra_only(graph)
    assert fired(report, "const-reassoc") and fired(report, "fold-binary")
    assert fired(report, "identity")
    assert count(out, Op.MUL) == 1 and count(out, Op.ADD) == 0
    assert_same(graph, out)


def test_exp_log_recip_cancel() -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 5), DType.F32)
    a = b.unary(Op.LOG2, b.unary(Op.EXP2, x))  # = x
    c = b.unary(Op.RECIP, b.unary(Op.RECIP, x))  # = x
    s = b.unary(Op.SQRT, x)
    d = b.unary(Op.EXP2, b.unary(Op.LOG2, s))  # = sqrt(x): sqrt is >= 0
    graph = b.build({"a": a, "c": c, "d": d})
    out, report = algebra_only(graph)
    assert fired(report, "exp-log") and fired(report, "recip")
    assert {n.op for n in out.nodes} == {Op.INPUT, Op.SQRT}
    assert_same(graph, out, positive=True)


def test_exp2_log2_kept_when_sign_unknown() -> None:
    b = GraphBuilder()
    x = b.input("x", (6,), DType.F32)
    graph = b.build({"y": b.unary(Op.EXP2, b.unary(Op.LOG2, x))})
    out, _ = algebra_only(graph)
    assert count(out, Op.EXP2) == 1 and count(out, Op.LOG2) == 1  # x < 0 gives NaN


def test_views_fold() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4), DType.F32)
    back = b.permute(b.permute(x, (2, 0, 1)), (1, 2, 0))  # the identity
    flat = b.reshape(b.reshape(x, (6, 4)), (24,))
    graph = b.build({"back": b.unary(Op.SIN, back), "flat": flat})
    out, report = algebra_only(graph)
    assert fired(report, "view-fold")
    assert count(out, Op.PERMUTE) == 0 and count(out, Op.RESHAPE) == 1
    assert_same(graph, out)


def test_scale_moves_onto_the_weights() -> None:
    """(x @ W + b) * c: the scale folds into W and b, no elementwise multiply is left."""
    b = GraphBuilder()
    x = b.input("x", (4, 16), DType.F32)
    w = b.const(RNG.standard_normal((16, 8)).astype(np.float32), name="w")
    bias = b.const(RNG.standard_normal((8,)).astype(np.float32), name="bias")
    y = m.add(b, cc.matmul(b, x, w), bias)
    graph = b.build({"y": b.binary(Op.MUL, y, scalar(b, 0.125, y))})
    out, report = algebra_only(graph)
    assert fired(report, "const-into-sum") and fired(report, "const-distribute")
    assert count(out, Op.MUL) == 1  # the contraction's own product
    assert_same(graph, out)


def test_attention_scale_folds_into_a_projection() -> None:
    b = GraphBuilder()
    x = b.input("x", (8, 16), DType.F32)
    wq = b.const(RNG.standard_normal((16, 16)).astype(np.float32), name="wq")
    wk = b.const(RNG.standard_normal((16, 16)).astype(np.float32), name="wk")
    q, k = cc.matmul(b, x, wq), cc.matmul(b, x, wk)
    s = cc.matmul(b, q, b.permute(k, (1, 0)))
    graph = b.build({"s": b.binary(Op.MUL, s, scalar(b, 0.25, s))})
    out, report = algebra_only(graph)
    assert fired(report, "scalar-reassoc")
    assert count(out, Op.MUL) == count(graph, Op.MUL) - 1
    assert_same(graph, out)


def test_batchnorm_folds_into_the_convolution() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 3, 10, 10), DType.F32)
    w = b.const(RNG.standard_normal((6, 3, 3, 3)).astype(np.float32), name="w")
    y = cc.conv(b, x, w, None, (1, 1), ((1, 1), (1, 1)), (1, 1))
    stats = [b.const(RNG.uniform(0.5, 1.5, 6).astype(np.float32)) for _ in range(4)]
    y = norm.batch_norm(b, y, *stats, 1e-5)
    graph = b.build({"y": m.relu(b, y)})
    out, report = algebra_only(graph)
    assert fired(report, "const-through-view") and fired(report, "const-into-sum")
    assert count(out, Op.MUL) == count(graph, Op.MUL) - 1  # the per-channel scale is gone
    assert_same(graph, out)


def test_elementwise_runs_before_the_broadcast() -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 1), DType.F32)
    graph = b.build({"y": b.unary(Op.RECIP, b.expand(x, (4, 32)))})
    out, report = algebra_only(graph)
    assert fired(report, "elementwise-under-expand")
    (recip,) = [n for n in out.nodes if n.op is Op.RECIP]
    assert recip.shape == (4, 1)
    assert_same(graph, out, positive=True)


def test_widened_literal_product_narrows() -> None:
    b = GraphBuilder()
    x = b.input("x", (5, 7), DType.F32)
    wide = b.cast(x, DType.F64)
    y = b.cast(b.binary(Op.MUL, wide, m.like(b, 0.7071067811865476, wide)), DType.F32)
    graph = b.build({"y": y})
    out, report = algebra_only(graph)
    assert fired(report, "cast-roundtrip")
    assert count(out, Op.CAST) == 0
    assert_same(graph, out)


@pytest.mark.parametrize("dtype", [DType.F16, DType.I32])
def test_literals_of_other_dtypes_are_left_alone(dtype: DType) -> None:
    b = GraphBuilder()
    x = b.input("x", (4,), dtype)
    y = b.binary(Op.MUL, b.binary(Op.MUL, x, m.like(b, 3, x)), m.like(b, 5, x))
    graph = b.build({"y": y})
    out, report = algebra_only(graph)
    assert report.fallback is None
    feeds = {"x": np.arange(4).astype(dtype.np)}
    np.testing.assert_array_equal(
        interpreter.run(out, feeds)["y"], interpreter.run(graph, feeds)["y"]
    )
