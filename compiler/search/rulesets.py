"""Rules as data: a family of named rules, each run as its own ruleset so `saturate` can
count its matches and time it separately."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from egglog import Bool, PyObject, RewriteOrRule, String, eq, relation, rule, ruleset, union, var
from egglog.egraph import Ruleset

from luminal.compiler.search.terms import Tensor

#: made(e, family): a rule of `family` added an alternative to e-class e (for the report).
made = relation("made", Tensor, String, egg_fn="made")


@dataclass(frozen=True)
class Rule:
    """A named rewrite (one or a few egglog rules that only make sense together), run as
    its own ruleset so its matches and time are reported separately."""

    name: str
    family: str
    rules: tuple[RewriteOrRule, ...]
    doc: str = ""

    @functools.cached_property
    def ruleset(self) -> Ruleset:
        return ruleset(*self.rules, name=f"{self.family}.{self.name}")


class Family:
    """Builds the rules of one family: `family.rule(name, doc, lhs >> rhs, ...)`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rules: list[Rule] = []

    def rewrite(self, lhs: Tensor, rhs: Tensor, *facts, tag: bool = True) -> RewriteOrRule:  # type: ignore[no-untyped-def]
        """lhs = rhs when `facts` hold; `tag` marks the e-class for the report (off for
        rules that only reorder, such as commutativity)."""
        e = var("e_", Tensor)
        actions = [union(e).with_(rhs)]
        if tag:
            actions.append(made(e, self.name))
        return rule(eq(e).to(lhs), *facts).then(*actions)

    def add(self, name: str, doc: str, *rules: RewriteOrRule) -> None:
        self.rules.append(Rule(name, self.name, tuple(rules), doc))


def py(fn) -> PyObject:  # type: ignore[no-untyped-def]
    """A Python function as an egglog value, callable inside rules."""
    return PyObject(fn)


def holds(obj: PyObject):  # type: ignore[no-untyped-def]
    """A rule fact: a PyObject predicate's result is true."""
    return obj.to_bool() == Bool(True)
