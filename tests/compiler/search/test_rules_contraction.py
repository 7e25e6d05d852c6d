"""Contraction rules: decompositions that are not a plain SUM(MUL(view, view)) become one,
so the scheduler makes a blocked contraction kernel of them; semantics are checked on the
reference interpreter."""

from __future__ import annotations

import numpy as np

from luminal.compiler.frontend.compose import contraction as cc
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir.builder import GraphBuilder
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph
from luminal.compiler.ir.ops import Op
from luminal.compiler.schedule import schedule
from luminal.compiler.search.saturate import rewrite
from tests.compiler.search.rule_checks import assert_same, fired

RNG = np.random.default_rng(0)


def kinds(graph: Graph) -> list[str]:
    return [k.kind for k in schedule(graph).kernels]


def count(graph: Graph, op: Op) -> int:
    return sum(node.op is op for node in graph.nodes)


def test_matmul_is_recognized() -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 8), DType.F32)
    w = b.const(RNG.standard_normal((8, 5)).astype(np.float32))
    graph = b.build({"y": cc.matmul(b, x, w)})
    out, report = rewrite(graph, families=("contraction",))
    assert fired(report, "recognize")
    assert kinds(out) == ["contraction"]
    assert_same(graph, out)


def test_a_row_scale_inside_a_contraction_moves_to_its_epilogue() -> None:
    """sum_k (A[i,k] * s[i]) * B[k,j]: three operands under one SUM are a reduce kernel;
    with s factored out it is a contraction with an elementwise epilogue."""
    b = GraphBuilder()
    a = b.input("a", (6, 10), DType.F32)
    s = b.input("s", (6, 1), DType.F32)
    w = b.input("w", (10, 7), DType.F32)
    full = (6, 10, 7)
    ea = b.expand(b.reshape(a, (6, 10, 1)), full)
    es = b.expand(b.reshape(s, (6, 1, 1)), full)
    ew = b.expand(b.reshape(w, (1, 10, 7)), full)
    y = b.reduce(Op.SUM, b.binary(Op.MUL, b.binary(Op.MUL, ea, es), ew), [1])
    graph = b.build({"y": y})
    assert "contraction" not in kinds(graph)
    out, report = rewrite(graph, families=("contraction", "algebra"))
    assert fired(report, "factor-out")
    assert "contraction" in kinds(out)
    assert_same(graph, out)


def test_a_literal_factor_leaves_the_sum() -> None:
    b = GraphBuilder()
    x = b.input("x", (5, 9), DType.F32)
    y = b.reduce(Op.SUM, b.binary(Op.MUL, x, m.like(b, 0.5, x)), [1])
    graph = b.build({"y": y})
    out, report = rewrite(graph, families=("contraction",))
    assert fired(report, "factor-out")
    (total,) = [n for n in out.nodes if n.op is Op.SUM]
    assert out.nodes[total.src[0]].op is Op.INPUT  # the multiply runs on the 5 sums
    assert_same(graph, out)


def test_nested_and_trivial_reductions() -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 4, 5, 1), DType.F32)
    two = b.reduce(Op.SUM, b.reduce(Op.SUM, x, [1]), [2])
    top = b.reduce(Op.RMAX, b.reduce(Op.RMAX, x, [2]), [1])
    unit = b.reduce(Op.SUM, b.unary(Op.SIN, x), [3])  # an axis of length 1
    graph = b.build({"two": two, "top": top, "unit": unit})
    out, report = rewrite(graph, families=("contraction",))
    assert fired(report, "sum-merge") and fired(report, "sum-unit")
    assert count(out, Op.SUM) == 1 and count(out, Op.RMAX) == 1
    assert_same(graph, out)


def test_sum_moves_inside_a_permute() -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 4, 5), DType.F32)
    y = b.reduce(Op.SUM, b.permute(b.unary(Op.SIN, x), (2, 0, 1)), [2])
    graph = b.build({"y": b.unary(Op.EXP2, y)})
    out, report = rewrite(graph, families=("contraction",))
    assert fired(report, "sum-through-permute")
    assert_same(graph, out)


def test_the_constant_part_of_an_operand_folds() -> None:
    """(x + beta) @ W = x @ W + beta @ W, and beta @ W is a constant: a bias."""
    b = GraphBuilder()
    x = b.input("x", (4, 8), DType.F32)
    beta = b.const(RNG.standard_normal((8,)).astype(np.float32))
    w = b.const(RNG.standard_normal((8, 6)).astype(np.float32))
    graph = b.build({"y": cc.matmul(b, m.add(b, x, beta), w)})
    out, report = rewrite(graph)
    assert fired(report, "sum-split-const")
    assert kinds(out) == ["contraction"]  # the add became the contraction's epilogue
    assert_same(graph, out)
