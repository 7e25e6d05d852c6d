"""Rules as data: a family of named rules, each written as a typed function beside the
terms it matches, egglog-style, and each run as its own ruleset.

    family = Family("algebra")

    @family.rule("identity")
    def identity(x: Tensor, s: PyObject, d: String) -> Rules:
        "x*1 = x."
        yield family.rewrite(Mul(x, Fill(1.0, s, d)), x)

    RULES = (identity, ...)   # the family's rules, in the order a round runs them

A rule function's typed parameters are its pattern variables (as in egglog's
`ruleset.register`); it yields the egglog rules that make up one rewrite, and its
docstring documents it in the report.  Running each `Rule` as a ruleset of its own is what
lets `saturate` count its matches and time it separately.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from inspect import signature
from typing import get_type_hints

from egglog import Bool, PyObject, RewriteOrRule, String, eq, relation, rule, ruleset, union, var
from egglog.egraph import Ruleset

from luminal.compiler.search.terms import Tensor

Rules = Iterator[RewriteOrRule]

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


@dataclass(frozen=True)
class Family:
    """A rule family: its name tags the e-classes its rules add alternatives to."""

    name: str

    def rule(self, name: str) -> Callable[[Callable[..., Rules]], Rule]:
        """Decorator: call the function with one pattern variable per typed parameter and
        collect the rules it yields as the `Rule` called `name`."""

        def make(fn: Callable[..., Rules]) -> Rule:
            hints = get_type_hints(fn)
            variables = [var(p, hints[p]) for p in signature(fn).parameters]
            doc = " ".join((fn.__doc__ or "").split())  # one line, as the report prints it
            return Rule(name, self.name, tuple(fn(*variables)), doc)

        return make

    def rewrite(self, lhs: Tensor, rhs: Tensor, *facts, tag: bool = True) -> RewriteOrRule:  # type: ignore[no-untyped-def]
        """lhs = rhs when `facts` hold; `tag` marks the e-class for the report (off for
        rules that only reorder, such as commutativity)."""
        e = var("e_", Tensor)
        actions = [union(e).with_(rhs)]
        if tag:
            actions.append(made(e, self.name))
        return rule(eq(e).to(lhs), *facts).then(*actions)


def py(fn) -> PyObject:  # type: ignore[no-untyped-def]
    """A Python function as an egglog value, callable inside rules."""
    return PyObject(fn)


def holds(obj: PyObject):  # type: ignore[no-untyped-def]
    """A rule fact: a PyObject predicate's result is true."""
    return obj.to_bool() == Bool(True)


__all__ = ["Family", "Rule", "Rules", "holds", "made", "py"]
