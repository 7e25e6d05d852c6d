"""The e-graph's term table: it speaks every IR op, its maps round-trip, the generated
constructors have the table's signatures, and a graph with one node of every op goes
through encode -> snapshot -> decode to a graph computing the same values."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.ir import interpreter
from luminal.compiler.ir.builder import GraphBuilder
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph
from luminal.compiler.ir.ops import ARITY, Op
from luminal.compiler.search import terms
from luminal.compiler.search.encoder import encode
from luminal.compiler.search.language import BY_NAME, BY_OP, Kind, Term
from luminal.compiler.search.saturate import rewrite
from luminal.compiler.search.snapshot import snapshot


def every_op_graph() -> Graph:
    """One node (at least) of every IR op, none of them foldable away."""
    b = GraphBuilder()
    x = b.input("x", (4, 6), DType.F32)
    ids = b.input("ids", (3,), DType.I64)
    n = b.input("n", (4, 6), DType.I64)
    w = b.const(np.linspace(-1.0, 1.0, 30, dtype=np.float32).reshape(5, 6), name="w")
    half = b.expand(b.reshape(b.const(np.array(0.5, np.float32)), (1, 1)), (4, 6))
    e = b.unary(Op.EXP2, x)
    y = b.binary(Op.ADD, b.unary(Op.LOG2, e), b.unary(Op.SIN, x))
    y = b.binary(Op.MUL, y, b.unary(Op.RECIP, b.unary(Op.SQRT, e)))
    y = b.binary(Op.MAX, y, b.binary(Op.MOD, x, half))
    ints = b.binary(Op.IDIV, n, b.expand(b.reshape(b.const(np.array(3, np.int64)), (1, 1)), (4, 6)))
    y = b.binary(Op.ADD, y, b.cast(ints, DType.F32))
    mask = b.binary(Op.CMPLT, x, half)
    same = b.binary(Op.CMPEQ, ints, n)
    y = b.where(mask, y, b.where(same, x, half))
    y = b.binary(Op.ADD, y, b.iota((4, 6), 1, DType.F32))
    rows = b.gather(w, ids, 0)
    cols = b.reshape(b.permute(b.slice(y, [(0, 1, 3), (0, 2, 3)]), (1, 0)), (9,))
    scattered = b.scatter(y, b.iota((4, 6), 1, DType.I64), b.unary(Op.SIN, y), 1)
    padded = b.pad(b.reduce(Op.SUM, y, (1,)), [(1, 0), (0, 2)], 0.0)
    peak = b.expand(b.reduce(Op.RMAX, y, (0,)), (4, 6))
    return b.build(
        {"rows": rows, "cols": cols, "scattered": scattered, "padded": padded, "peak": peak}
    )


def test_every_ir_op_has_exactly_one_term() -> None:
    assert set(BY_OP) == set(Op)
    for op in Op:
        term = Term.of(op)
        assert term.op is op
        assert term.arity == ARITY[op]
    e_graph_only = {t for t in Term if t.op is None}
    assert e_graph_only == {Term.FILL, Term.CONCAT}
    assert Term.CONCAT.kind is Kind.JOIN and Term.CONCAT.arity == 2


def test_name_and_op_maps_round_trip() -> None:
    assert len(BY_NAME) == len(Term)  # egglog names are unique
    for name, term in BY_NAME.items():
        assert Term.named(name) is term and term.egg_name == name
        if term.op is not None:
            assert Term.of(term.op).egg_name == name  # name -> Op -> name
    for op in Op:
        assert Term.named(Term.of(op).egg_name).op is op  # Op -> name -> Op


def test_constructors_are_generated_from_the_table() -> None:
    for term in Term:
        assert getattr(terms, term.egg_name) is terms.CONSTRUCTORS[term]
    with pytest.raises(AttributeError):
        terms.Tanh  # noqa: B018


def test_the_encoder_emits_table_terms_for_every_op_and_they_read_back() -> None:
    graph = every_op_graph()
    assert {node.op for node in graph.nodes} == set(Op)
    enc = encode(graph)
    emitted = {term for _, term, _ in enc.original}
    assert emitted == {*BY_OP.values(), Term.FILL}
    view = snapshot(enc.egraph)
    assert {node.op for node in view.nodes} == emitted
    for node in view.nodes:
        assert len(node.children) == node.op.arity
        assert len(node.params) == len(node.op.params)


def test_every_op_decodes_to_the_same_values() -> None:
    graph = every_op_graph()
    out, report = rewrite(graph, families=())
    assert report.fallback is None, report.fallback
    assert {node.op for node in out.nodes} == set(Op)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((4, 6)).astype(np.float32),
        "ids": np.array([4, 0, 2], np.int64),
        "n": rng.integers(-9, 9, (4, 6)).astype(np.int64),
    }
    want, got = interpreter.run(graph, feeds), interpreter.run(out, feeds)
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
