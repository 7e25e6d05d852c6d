"""What every e-class is known to be, run to saturation before each rewrite round.

- `shape` and `dtype` of every e-class (opaque `Input` and `Const` leaves get theirs as
  facts when the graph is encoded), so rules can guard on them and the decoder can fold;
- `is_const`: the value depends on constants only (never on inputs or iota), so the
  decoder folds it into a weight;
- `nonneg`: provably >= 0 (or NaN) for every element, which makes exp2(log2(x)) = x sound.

The rules for the regular families (unary math, binary ops, everything foldable) are made
per `Term` of that kind, so an op added to the table is typed and folded with no edit here.
Shape arithmetic is plain Python over tuples, called from rules through `PyObject`.
"""

from __future__ import annotations

from egglog import (
    PyObject,
    RewriteOrRule,
    String,
    StringLike,
    eq,
    f64,
    function,
    i64,
    relation,
    rule,
    ruleset,
    set_,
    var,
    vars_,
)

from luminal.compiler.ir.ops import COMPARE
from luminal.compiler.search.language import Kind, Term
from luminal.compiler.search.terms import (
    CONSTRUCTORS,
    SORT_TYPES,
    Add,
    Concat,
    Const,
    Exp2,
    Expand,
    Fill,
    Gather,
    Iota,
    Max,
    Mul,
    Pad,
    Permute,
    Recip,
    Reshape,
    Rmax,
    Scatter,
    Slice,
    Sqrt,
    Sum,
    Tensor,
    Where,
)


@function(merge=lambda old, new: old, egg_fn="shape")
def shape(x: Tensor) -> PyObject: ...


@function(merge=lambda old, new: old, egg_fn="dtype")
def dtype(x: Tensor) -> String: ...


is_const = relation("is_const", Tensor, egg_fn="is_const")
nonneg = relation("nonneg", Tensor, egg_fn="nonneg")

#: Kinds whose value is a function of their operands alone: constant operands fold.
FOLDABLE = frozenset({Kind.UNARY, Kind.BINARY, Kind.TERNARY, Kind.REDUCE, Kind.VIEW, Kind.JOIN})


# Shape arithmetic, called from rules through PyObject.  Pure functions of tuples.
def reduce_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if k in axes else d for k, d in enumerate(shape))


def permute_shape(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape[p] for p in perm)


def pad_shape(shape: tuple[int, ...], spec: tuple) -> tuple[int, ...]:  # type: ignore[type-arg]
    widths, _ = spec
    return tuple(d + a + b for d, (a, b) in zip(shape, widths, strict=True))


def slice_shape(spec: tuple) -> tuple[int, ...]:  # type: ignore[type-arg]
    return tuple(spec[1])


def gather_shape(data: tuple[int, ...], indices: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return data[:axis] + indices + data[axis + 1 :]


def concat_shape(a: tuple[int, ...], b: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return (*a[:axis], a[axis] + b[axis], *a[axis + 1 :])


def _types() -> list[RewriteOrRule]:
    """shape and dtype, from the operands' (the data operand's, for where and scatter)."""
    a, b, c, e = vars_("a b c e", Tensor)
    s, t, u = vars_("s t u", PyObject)
    v = var("v", f64)
    k = var("k", i64)
    d, d2 = vars_("d d2", String)
    rules: list[RewriteOrRule] = []

    def both(pattern: Tensor, shape_of: PyObject, dtype_of: StringLike, *facts) -> None:  # type: ignore[no-untyped-def]
        rules.append(rule(eq(e).to(pattern), *facts).then(set_(shape(e)).to(shape_of)))
        rules.append(rule(eq(e).to(pattern), *facts).then(set_(dtype(e)).to(dtype_of)))

    both(Fill(v, s, d), s, d)
    both(Iota(k, s, d), s, d)
    for term in Term.of_kind(Kind.UNARY):
        if term is Term.CAST:
            both(CONSTRUCTORS[term](a, d2), s, d2, shape(a) == s)
        else:
            both(CONSTRUCTORS[term](a), s, d, shape(a) == s, dtype(a) == d)
    for term in Term.of_kind(Kind.BINARY):
        out = String("bool") if term.op in COMPARE else d
        both(CONSTRUCTORS[term](a, b), s, out, shape(a) == s, dtype(a) == d)
    both(Where(c, a, b), s, d, shape(a) == s, dtype(a) == d)
    for ctor in (Sum, Rmax):
        both(ctor(a, t), PyObject(reduce_shape)(s, t), d, shape(a) == s, dtype(a) == d)
    both(
        Gather(a, b, k),
        PyObject(gather_shape)(s, u, PyObject.from_int(k)),
        d,
        shape(a) == s,
        shape(b) == u,
        dtype(a) == d,
    )
    both(Scatter(a, b, c, k), s, d, shape(a) == s, dtype(a) == d)
    both(Reshape(a, t), t, d, dtype(a) == d)
    both(Expand(a, t), t, d, dtype(a) == d)
    both(Permute(a, t), PyObject(permute_shape)(s, t), d, shape(a) == s, dtype(a) == d)
    both(Pad(a, t), PyObject(pad_shape)(s, t), d, shape(a) == s, dtype(a) == d)
    both(Slice(a, t), PyObject(slice_shape)(t), d, dtype(a) == d)
    both(
        Concat(a, b, t),
        PyObject(concat_shape)(s, u, t),
        d,
        shape(a) == s,
        shape(b) == u,
        dtype(a) == d,
    )
    return rules


def _constants() -> list[RewriteOrRule]:
    """is_const: built from constants only, so foldable."""
    e = var("e", Tensor)
    v = var("v", f64)
    n = var("n", String)
    s = var("s", PyObject)
    d = var("d", String)
    rules = [
        rule(eq(e).to(Const(n))).then(is_const(e)),
        rule(eq(e).to(Fill(v, s, d))).then(is_const(e)),
    ]
    for term in Term:
        if term.kind not in FOLDABLE:
            continue
        operands = [var(f"o{k}", Tensor) for k in range(term.arity)]
        params = [var(f"p{k}", SORT_TYPES[p.sort]) for k, p in enumerate(term.params)]
        pattern = CONSTRUCTORS[term](*operands, *params)
        rules.append(rule(eq(e).to(pattern), *map(is_const, operands)).then(is_const(e)))
    return rules


def _nonnegative() -> list[RewriteOrRule]:
    """nonneg: provably >= 0 (or NaN) for every element."""
    a, b, c, e = vars_("a b c e", Tensor)
    s, t = vars_("s t", PyObject)
    v = var("v", f64)
    d = var("d", String)
    rules = [rule(eq(e).to(Fill(v, s, d)), v >= 0.0).then(nonneg(e))]
    for x in (Exp2(a), Sqrt(a), Mul(a, a)):
        rules.append(rule(eq(e).to(x)).then(nonneg(e)))
    for ctor in (Reshape, Expand, Permute, Slice, Sum, Rmax):
        rules.append(rule(eq(e).to(ctor(a, t)), nonneg(a)).then(nonneg(e)))
    rules.append(rule(eq(e).to(Recip(a)), nonneg(a)).then(nonneg(e)))
    for ctor in (Add, Mul):
        rules.append(rule(eq(e).to(ctor(a, b)), nonneg(a), nonneg(b)).then(nonneg(e)))
    rules.append(rule(eq(e).to(Max(a, b)), nonneg(a)).then(nonneg(e)))
    rules.append(rule(eq(e).to(Max(a, b)), nonneg(b)).then(nonneg(e)))
    rules.append(rule(eq(e).to(Where(c, a, b)), nonneg(a), nonneg(b)).then(nonneg(e)))
    return rules


ANALYSIS = ruleset(*_types(), *_constants(), *_nonnegative(), name="analysis")

__all__ = [
    "ANALYSIS",
    "concat_shape",
    "dtype",
    "gather_shape",
    "is_const",
    "nonneg",
    "pad_shape",
    "permute_shape",
    "reduce_shape",
    "shape",
    "slice_shape",
]
