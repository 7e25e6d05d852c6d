"""The IR as an egglog datatype: the `Tensor` sort and one constructor per `Term`.

The constructors are generated from `language.Term`, so the table is the only place a
constructor is spelt: tensor operands first (as many as the term's arity), then its
primitive params with the sorts the table names.  egglog function names are the table's
egglog names, so a frozen e-graph reads back without the high-level layer (`snapshot`).

Op-specific arguments (shapes, permutations, axes, pad and slice specs) are `PyObject`
tuples, so the few rules that need shape arithmetic call plain Python functions instead
of spelling index arithmetic in egglog.  Tuples of ints hash by value, so equal arguments
are one e-graph value.

Rules read like the terms they match: `from luminal.compiler.search.terms import Mul`
resolves through the module's `__getattr__` to the generated constructor egglog calls
`Mul`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from inspect import Parameter, Signature
from types import MappingProxyType

from egglog import Expr, PyObject, String, StringLike, f64, f64Like, function, i64, i64Like

from luminal.compiler.search.language import BY_NAME, Sort, Term


class Tensor(Expr):
    """A tensor-valued IR term."""


Constructor = Callable[..., Tensor]

#: The egglog type of each parameter sort (for pattern variables)...
SORT_TYPES: Mapping[Sort, type] = MappingProxyType(
    {Sort.STRING: String, Sort.F64: f64, Sort.I64: i64, Sort.OBJECT: PyObject}
)
#: ... and what a constructor accepts for it (Python values convert).
_ACCEPTS: Mapping[Sort, object] = {
    Sort.STRING: StringLike,
    Sort.F64: f64Like,
    Sort.I64: i64Like,
    Sort.OBJECT: PyObject,
}
_OPERANDS = ("a", "b", "c")


def _constructor(term: Term) -> Constructor:
    """egglog's `@function` applied to a stub with the term's typed signature, as if it
    had been written out by hand."""

    def stub(*args: object) -> Tensor: ...

    operands = ("x",) if term.arity == 1 else _OPERANDS[: term.arity]
    hints: dict[str, object] = {name: Tensor for name in operands}
    hints |= {p.name: _ACCEPTS[p.sort] for p in term.params}
    stub.__signature__ = Signature(  # type: ignore[attr-defined]
        [Parameter(name, Parameter.POSITIONAL_OR_KEYWORD) for name in hints],
        return_annotation=Tensor,
    )
    stub.__annotations__ = {**hints, "return": Tensor}
    stub.__name__ = stub.__qualname__ = term.egg_name
    stub.__module__ = __name__
    return function(egg_fn=term.egg_name)(stub)


CONSTRUCTORS: Mapping[Term, Constructor] = MappingProxyType({t: _constructor(t) for t in Term})


def __getattr__(name: str) -> Constructor:
    """`from terms import Mul`: the generated constructor egglog calls `Mul`."""
    term = BY_NAME.get(name)
    if term is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return CONSTRUCTORS[term]


__all__ = ["CONSTRUCTORS", "SORT_TYPES", "Constructor", "Tensor"]
