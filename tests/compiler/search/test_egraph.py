"""The e-graph stage itself: encode and decode round trip, compile-time folding of
constant subterms, extraction by cost, budgets and their stop reasons, the fallback when a
rule is wrong, and the report."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from egglog import PyObject

from luminal.compiler.frontend.compose import contraction as cc
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import norm
from luminal.compiler.ir import interpreter, spec
from luminal.compiler.ir.builder import GraphBuilder
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph
from luminal.compiler.ir.ops import Op
from luminal.compiler.search import saturate, saturation
from luminal.compiler.search.choice import choose
from luminal.compiler.search.encoder import encode
from luminal.compiler.search.fold import Folded, NotFoldable, compress, fold_node, leaf
from luminal.compiler.search.language import Term
from luminal.compiler.search.rulesets import Family, Rules
from luminal.compiler.search.saturate import SaturationBudget, rewrite
from luminal.compiler.search.snapshot import snapshot
from luminal.compiler.search.terms import Sum, Tensor

RNG = np.random.default_rng(0)


def feeds_for(graph: Graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    out = {}
    for s in graph.input_specs():
        if s.dtype.is_float:
            out[s.name] = rng.standard_normal(s.shape).astype(s.dtype.np)
        else:
            out[s.name] = rng.integers(0, 4, s.shape).astype(s.dtype.np)
    return out


def assert_same(before: Graph, after: Graph, rtol: float = 1e-5) -> None:
    feeds = feeds_for(before)
    want, got = interpreter.run(before, feeds), interpreter.run(after, feeds)
    assert want.keys() == got.keys()
    for name, value in want.items():
        scale = max(1.0, float(np.max(np.abs(value))))
        np.testing.assert_allclose(got[name], value, rtol=rtol, atol=rtol * scale)


def small_model() -> Graph:
    """A little of everything: matmul with bias, a scale, softmax, layer norm, an integer
    path with a gather, a comparison and a select."""
    b = GraphBuilder()
    x = b.input("x", (6, 16), DType.F32)
    ids = b.input("ids", (6,), DType.I64)
    table = b.const(RNG.standard_normal((4, 16)).astype(np.float32), name="table")
    w = b.const((RNG.standard_normal((16, 16)) / 4).astype(np.float32), name="w")
    bias = b.const(RNG.standard_normal((16,)).astype(np.float32), name="bias")
    h = m.add(b, b.gather(table, ids, 0), x)
    y = m.add(b, cc.matmul(b, h, w), bias)
    y = b.binary(Op.MUL, y, m.like(b, 0.25, y))
    y = norm.softmax(b, y, 1)
    z = norm.layer_norm(b, h, None, None, [1], 1e-5)
    mask = b.binary(Op.CMPLT, z, m.like(b, 0.0, z))
    z = b.where(mask, m.like(b, 0.0, z), z)
    return b.build({"y": y, "z": z, "h": h})


def test_round_trip_without_rules() -> None:
    graph = small_model()
    out, report = rewrite(graph, families=())
    assert report.fallback is None
    assert report.nodes_after <= report.nodes_before
    spec.check(out)
    assert out.input_specs() == graph.input_specs()
    assert out.output_specs() == graph.output_specs()
    assert_same(graph, out)


def test_all_families_preserve_semantics_and_report() -> None:
    graph = small_model()
    out, report = rewrite(graph)
    assert report.fallback is None
    assert report.stop_reason in saturation.STOP_REASONS
    assert report.iterations >= 1 and report.enodes > 0
    assert {r.family for r in report.rules} >= {"algebra", "contraction", "fusion", "analysis"}
    assert all(r.matches >= 0 and r.seconds >= 0 for r in report.rules)
    assert report.rewrites_applied and all(v > 0 for v in report.rewrites_applied.values())
    assert report.nodes_after == len(out.nodes)
    assert_same(graph, out)


def test_report_serializes_and_formats() -> None:
    _, report = rewrite(small_model())
    data = json.loads(json.dumps(report.to_json()))
    assert data["stop_reason"] == report.stop_reason
    assert len(data["rules"]) == len(report.rules)
    assert {"name", "family", "matches", "seconds"} <= set(data["rules"][0])
    assert report.format().startswith("e-graph: ")
    verbose = report.format(verbose=True)
    fired = [r for r in report.rules if r.matches]
    assert all(r.name in verbose for r in fired)


@pytest.mark.parametrize(
    ("budget", "reason"),
    [
        (SaturationBudget(iterations=1), "iterations"),
        (SaturationBudget(enodes=10), "enodes"),
        (SaturationBudget(seconds=0.0), "seconds"),
    ],
)
def test_a_tiny_budget_stops_with_its_reason_and_still_rewrites_validly(
    budget: SaturationBudget, reason: str
) -> None:
    graph = small_model()
    start = time.perf_counter()
    out, report = rewrite(graph, budget)
    assert report.stop_reason == reason
    assert report.fallback is None
    assert time.perf_counter() - start < 10
    spec.check(out)
    assert_same(graph, out)


def test_unknown_family_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown rule families"):
        rewrite(small_model(), families=("algebra", "magic"))


def test_a_wrong_rule_falls_back_to_the_original(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that breaks typing (dropping a reduction) is caught when the graph is rebuilt;
    the original graph comes back and the report says why."""
    wrong = Family("broken")

    @wrong.rule("drop-sum")
    def drop_sum(x: Tensor, p: PyObject) -> Rules:
        """Wrong on purpose."""
        yield wrong.rewrite(Sum(x, p), x)

    monkeypatch.setattr(saturate, "family_rules", lambda families: (drop_sum,))
    graph = small_model()
    out, report = rewrite(graph)
    assert out is graph
    assert report.fallback and "GraphError" in report.fallback
    assert report.nodes_after == report.nodes_before
    assert report.fallback in report.format()


def test_compress_keeps_only_varying_axes() -> None:
    a = np.broadcast_to(np.arange(3.0).reshape(1, 3, 1), (4, 3, 5)).copy()
    assert compress(a).shape == (1, 3, 1)
    assert compress(np.zeros((2, 2), np.float32)).shape == (1, 1)
    b = RNG.standard_normal((3, 4))
    assert compress(b) is b
    assert leaf(b, "w").name == "w" and leaf(np.ones((2, 2)), "w").name is None
    assert leaf(b, "const7").name is None  # GraphBuilder's own names are not kept


def test_folding_matches_the_interpreter_and_refuses_bloat() -> None:
    w = Folded(RNG.standard_normal((1, 4, 3)).astype(np.float32), (5, 4, 3))
    s = Folded(RNG.standard_normal((1, 1, 3)).astype(np.float32), (5, 4, 3))
    prod = fold_node(Term.MUL, (), [w, s], (5, 4, 3), DType.F32)
    assert prod.small.shape == (1, 4, 3)
    np.testing.assert_allclose(prod.full(), w.full() * s.full(), rtol=1e-6)
    total = fold_node(Term.SUM, ((0, 1),), [prod], (1, 1, 3), DType.F32)
    np.testing.assert_allclose(total.full(), prod.full().sum((0, 1), keepdims=True), rtol=1e-5)
    outer_a = Folded(RNG.standard_normal((512, 1)).astype(np.float32), (512, 512))
    outer_b = Folded(RNG.standard_normal((1, 512)).astype(np.float32), (512, 512))
    with pytest.raises(NotFoldable):
        fold_node(Term.MUL, (), [outer_a, outer_b], (512, 512), DType.F32)


def test_extraction_prefers_a_folded_weight_over_a_runtime_multiply() -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 8), DType.F32)
    w = b.const(RNG.standard_normal((8, 6)).astype(np.float32), name="w")
    y = cc.matmul(b, x, w)
    graph = b.build({"y": b.binary(Op.MUL, y, m.like(b, 0.5, y))})
    enc = encode(graph)
    saturate.saturate(
        enc.egraph,
        saturate.family_rules(("algebra",)),
        SaturationBudget(),
        time.perf_counter() + 10,
    )
    view = snapshot(enc.egraph)
    root = view.lets["__out0"]
    choice = choose(view, [root])
    assert view.nodes[choice.best[root]].op is Term.RESHAPE  # not the elementwise Mul


def test_rank_zero_constants_keep_their_rank() -> None:
    """A scalar index or a scalar operand stays rank 0 when it is rebuilt."""
    b = GraphBuilder()
    x = b.input("x", (5, 4), DType.F32)
    s = b.input("s", (), DType.F32)
    row = b.gather(x, b.const(np.array(2, np.int64)), 0)
    y = b.binary(Op.MUL, s, b.const(np.array(3.0, np.float32)))
    graph = b.build({"row": row, "y": b.binary(Op.ADD, y, b.const(np.array(1.0, np.float32)))})
    out, report = rewrite(graph)
    assert report.fallback is None
    assert out.output_specs() == graph.output_specs()
    assert_same(graph, out)


@pytest.mark.slow
def test_every_onnx_op_case_rewrites_to_the_same_values(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The frontend's one-op ONNX cases (about 200 graphs of every op and dtype) through the
    whole rewrite: nothing falls back, and values match bit for bit on integers."""
    import onnx

    from luminal.compiler.frontend.onnx import load
    from tests.helpers.onnx_cases import CASES, feeds_of, node_model

    checked = 0
    for name, op, inputs, attrs, consts, extra in CASES:
        kwargs = {k: v for k, v in extra.items() if k in ("n_outputs", "opset")}
        try:
            model = node_model(op, inputs, attrs, consts=consts, **kwargs)
            onnx.save(model, tmp_path / "m.onnx")
            graph = load(tmp_path / "m.onnx").graph
            feeds = feeds_of(model, inputs, consts)
            want = interpreter.run(graph, feeds)
        except Exception:  # cases that test frontend errors
            continue
        out, report = rewrite(graph)
        assert report.fallback is None, (name, report.fallback)
        got = interpreter.run(out, feeds)
        for key, value in want.items():
            assert got[key].dtype == value.dtype and got[key].shape == value.shape, name
            if value.dtype.kind == "f":
                finite = np.where(np.isfinite(value), value, 0)
                scale = max(1.0, float(np.max(np.abs(finite), initial=0)))
                np.testing.assert_allclose(
                    got[key], value, rtol=1e-4, atol=1e-5 * scale, equal_nan=True, err_msg=name
                )
            else:
                np.testing.assert_array_equal(got[key], value, err_msg=name)
        checked += 1
    assert checked > 150
