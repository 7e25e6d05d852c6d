"""The e-graph's term table: it speaks every IR op and its maps round-trip."""

from __future__ import annotations

from luminal.compiler.ir.ops import ARITY, Op
from luminal.compiler.search.language import BY_NAME, BY_OP, Kind, Term


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
