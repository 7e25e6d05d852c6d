"""Rule families as the saturation loop sees them: every rule named, documented and
tagged with its family; a rule function's typed parameters become its pattern variables,
and the rule it makes fires and is reported under its own name."""

from __future__ import annotations

import numpy as np
import pytest
from egglog import PyObject, String

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import interpreter
from luminal.compiler.ir.builder import GraphBuilder
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.ops import Op
from luminal.compiler.search import saturate
from luminal.compiler.search.rulesets import Family, Rules
from luminal.compiler.search.terms import Expand, Fill, Mul, Tensor


@pytest.mark.parametrize("family", sorted(saturate.FAMILIES))
def test_rules_are_named_documented_and_tagged(family: str) -> None:
    rules = saturate.FAMILIES[family]
    names = [r.name for r in rules]
    assert len(names) == len(set(names))
    assert all(r.family == family and r.doc and r.rules for r in rules)
    assert saturate.family_rules((family,)) == rules


def test_the_suite_families_are_composed_in_order() -> None:
    assert list(saturate.FAMILIES) == ["algebra", "contraction", "fusion"]
    every = saturate.family_rules(("algebra", "contraction", "fusion"))
    assert every == sum((saturate.FAMILIES[f] for f in saturate.FAMILIES), ())


def test_a_rule_function_becomes_a_reported_rewrite(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = Family("probe")

    @probe.rule("times-one")
    def times_one(x: Tensor, s: PyObject, t: PyObject, d: String) -> Rules:
        """x * expand(1) = x, written
        over two lines."""
        yield probe.rewrite(Mul(x, Expand(Fill(1.0, s, d), t)), x)

    assert (times_one.name, times_one.family) == ("times-one", "probe")
    assert times_one.doc == "x * expand(1) = x, written over two lines."
    assert len(times_one.rules) == 1

    b = GraphBuilder()
    x = b.input("x", (3, 4), DType.F32)
    graph = b.build({"y": b.binary(Op.MUL, x, m.like(b, 1.0, x))})
    monkeypatch.setattr(saturate, "family_rules", lambda families: (times_one,))
    out, report = saturate.rewrite(graph)
    assert report.fallback is None
    stats = {(r.family, r.name): r.matches for r in report.rules}
    assert stats[("probe", "times-one")] >= 1
    assert all(node.op is not Op.MUL for node in out.nodes)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}
    np.testing.assert_array_equal(interpreter.run(out, feeds)["y"], feeds["x"])
