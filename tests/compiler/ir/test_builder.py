"""GraphBuilder typing rules, constant folding, dead-code removal, and the spec checker."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from luminal.compiler.ir import (
    DType,
    Graph,
    GraphBuilder,
    Node,
    Op,
    format_graph,
    interpreter,
    spec,
)
from luminal.errors import GraphError


def test_shape_rules_reject_malformed_nodes() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3), DType.F32)
    y = b.input("y", (3, 2), DType.F32)
    i = b.input("i", (2, 3), DType.I32)
    with pytest.raises(GraphError, match="differ in shape"):
        b.binary(Op.ADD, x, y)
    with pytest.raises(GraphError, match="differ in dtype"):
        b.binary(Op.ADD, x, i)
    with pytest.raises(GraphError, match="needs a float"):
        b.unary(Op.SQRT, i)
    with pytest.raises(GraphError, match="cannot reshape"):
        b.reshape(x, (4, 2))
    with pytest.raises(GraphError, match="cannot expand"):
        b.expand(x, (2, 6))
    with pytest.raises(GraphError, match="out of range"):
        b.slice(x, [(0, 1, 2), (1, 1, 3)])
    with pytest.raises(GraphError, match="idiv needs integer"):
        b.binary(Op.IDIV, x, x)
    with pytest.raises(GraphError, match="condition must be bool"):
        b.where(x, x, x)
    with pytest.raises(GraphError, match="duplicate graph input"):
        b.input("x", (1,), DType.F32)


def test_folding_evaluates_constant_subgraphs() -> None:
    b = GraphBuilder()
    c = b.const(np.array([1.0, 4.0], np.float32))
    folded = b.unary(Op.SQRT, b.binary(Op.ADD, c, c))
    assert b.is_const(folded)
    np.testing.assert_allclose(b.const_value(folded), np.sqrt([2.0, 8.0]))


def test_folding_does_not_materialise_broadcast_floats() -> None:
    b = GraphBuilder()
    c = b.const(np.float32(2.0))
    assert not b.is_const(b.expand(b.reshape(c, (1, 1)), (512, 512)))
    assert not b.is_const(b.expand(b.reshape(c, (1, 1)), (4, 4)))
    shape_math = b.expand(b.reshape(b.const(np.int64(3)), (1,)), (4,))
    assert b.is_const(shape_math)  # small integer tensors still fold (shape arithmetic)
    np.testing.assert_array_equal(b.const_value(shape_math), [3, 3, 3, 3])


def test_a_table_read_at_constant_positions_folds_up_to_fold_gather() -> None:
    """T5's relative position bias: 32 x 8 buckets read at 128 x 128 positions is a
    weight (its permute then folds too); a lookup bigger than FOLD_GATHER stays an op."""
    from luminal.compiler.ir.builder import FOLD_GATHER

    rng = np.random.default_rng(0)
    table = rng.standard_normal((32, 8)).astype(np.float32)
    buckets = rng.integers(0, 32, (128, 128)).astype(np.int64)
    b = GraphBuilder()
    bias = b.gather(b.const(table), b.const(buckets), 0)
    assert b.is_const(bias)
    np.testing.assert_array_equal(b.const_value(bias), table[buckets])
    heads_first = b.permute(bias, (2, 0, 1))
    assert b.is_const(heads_first)
    np.testing.assert_array_equal(b.const_value(heads_first), table[buckets].transpose(2, 0, 1))
    rows = FOLD_GATHER // 8 + 1  # one row of 8 too many
    big = b.gather(b.const(table), b.const(np.zeros(rows, np.int64)), 0)
    assert not b.is_const(big)


def test_common_subexpressions_are_shared() -> None:
    b = GraphBuilder()
    x = b.input("x", (3,), DType.F32)
    assert b.unary(Op.EXP2, x) == b.unary(Op.EXP2, x)


def test_build_drops_dead_nodes_and_constants() -> None:
    b = GraphBuilder()
    x = b.input("x", (3,), DType.F32)
    b.binary(Op.MUL, x, b.const(np.ones(3, np.float32), name="unused"))
    g = b.build({"y": b.unary(Op.EXP2, x)})
    assert [n.op for n in g.nodes] == [Op.INPUT, Op.EXP2]
    assert g.consts == {}
    assert "exp2(%0)" in format_graph(g)


def test_spec_accepts_built_graphs_and_rejects_tampered_ones() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3), DType.F32)
    g = b.build({"y": b.reduce(Op.SUM, b.permute(x, (1, 0)), [0])})
    spec.check(g)
    wrong_shape = dataclasses.replace(
        g, nodes=(*g.nodes[:-1], dataclasses.replace(g.nodes[-1], shape=(3, 1)))
    )
    with pytest.raises(GraphError, match="declares"):
        spec.check(wrong_shape)
    forward_ref = dataclasses.replace(
        g, nodes=(Node(Op.EXP2, (1,), (2, 3), DType.F32), *g.nodes[1:])
    )
    with pytest.raises(GraphError, match="bad operands"):
        spec.check(forward_ref)
    missing_const = Graph(
        nodes=(Node(Op.CONST, (), (1,), DType.F32, "nope"),), inputs=(), outputs=(("y", 0),)
    )
    with pytest.raises(GraphError, match="missing"):
        spec.check(missing_const)


def test_folded_graph_means_what_the_unfolded_one_did() -> None:
    """Folding evaluates with the interpreter itself; only summation order may differ."""
    w = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    results = []
    for fold in (True, False):
        b = GraphBuilder(fold=fold)
        xv = b.input("x", (2, 4), DType.F32)
        wt = b.permute(b.const(w), (1, 0))
        scaled = b.binary(Op.MUL, wt, b.expand(b.reshape(b.const(np.float32(0.5)), (1, 1)), (4, 4)))
        y = b.binary(Op.ADD, b.expand(b.reshape(b.reduce(Op.SUM, scaled, [0]), (1, 4)), (2, 4)), xv)
        results.append(interpreter.run(b.build({"y": y}), {"x": x})["y"])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-6)
