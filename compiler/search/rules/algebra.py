"""Algebraic rewrites: constant folding, identities, reassociation that gathers constants,
exp/log/recip cancellations, view folding, and constants moved onto weights.

Float arithmetic is not associative, so the reassociating rules change rounding (by about
one ulp per moved operation); the tolerance the search promises is 1e-5 relative.  Folding
of literals runs in f64 and rounds once, for f32 and f64 tensors only.  Rules that would be
wrong on some inputs are guarded by an analysis: exp2(log2(x)) = x only where `nonneg(x)`.

The rules that put constants together (`const-reassoc`, `const-distribute`,
`const-through-view`, `const-into-sum`) are what fold attention's 1/sqrt(d) into the query
weights and BatchNorm's scale into the convolution weights: they push a constant factor
down to another constant, and the decoder folds constant-only terms into one weight.
"""

from __future__ import annotations

from egglog import PyObject, String, f64

from luminal.compiler.search.analyses import (
    dtype,
    is_const,
    nonneg,
    permute_shape,
    shape,
    slice_shape,
)
from luminal.compiler.search.rulesets import Family, Rules, holds, py
from luminal.compiler.search.terms import (
    Add,
    Cast,
    Exp2,
    Expand,
    Fill,
    Log2,
    Max,
    Mul,
    Permute,
    Recip,
    Reshape,
    Slice,
    Sqrt,
    Sum,
    Tensor,
    Where,
)

FOLDS_IN_F64 = ("f32", "f64")
WIDER = {("f32", "f64"), ("f16", "f32"), ("f16", "f64"), ("bf16", "f32"), ("bf16", "f64")}


def exact_float(dt: str) -> bool:
    """Literals of this dtype fold in f64 and round once (f16/bf16 round per op: kept)."""
    return dt in FOLDS_IN_F64


def finite(text: str) -> bool:
    """The literal (egglog's decimal spelling of an f64) is a finite number."""
    return abs(float(text)) < 1e300


def widens(narrow: str, wide: str) -> bool:
    return (narrow, wide) in WIDER


def compose(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """permute(permute(x, p), q) == permute(x, compose(p, q))."""
    return tuple(p[i] for i in q)


def inverse(p: tuple[int, ...]) -> tuple[int, ...]:
    out = [0] * len(p)
    for i, j in enumerate(p):
        out[j] = i
    return tuple(out)


def is_identity(p: tuple[int, ...]) -> bool:
    return tuple(p) == tuple(range(len(p)))


def moves_only_unit_axes(s: tuple[int, ...], p: tuple[int, ...]) -> bool:
    """The permutation keeps every axis longer than 1 in order: it is a reshape."""
    big = [a for a in p if s[a] != 1]
    return big == sorted(big) and not is_identity(p)


def _f(value: f64) -> PyObject:
    return PyObject.from_string(value.to_string())


def _s(value: String) -> PyObject:
    return PyObject.from_string(value)


def _exact(d: String):  # type: ignore[no-untyped-def]
    return holds(py(exact_float)(_s(d)))


def _folds(d: String, value: f64):  # type: ignore[no-untyped-def]
    return (_exact(d), holds(py(finite)(_f(value))))


FAMILY = Family("algebra")
rw = FAMILY.rewrite


# ---- constant folding on literals ---------------------------------------------------
@FAMILY.rule("fold-binary")
def fold_binary(s: PyObject, v: f64, w: f64, d: String) -> Rules:
    """Arithmetic on two literals is a literal."""
    yield rw(Mul(Fill(v, s, d), Fill(w, s, d)), Fill(v * w, s, d), *_folds(d, v * w))
    yield rw(Add(Fill(v, s, d), Fill(w, s, d)), Fill(v + w, s, d), *_folds(d, v + w))
    yield rw(Max(Fill(v, s, d), Fill(w, s, d)), Fill(v.max(w), s, d), _exact(d))


@FAMILY.rule("fold-unary")
def fold_unary(s: PyObject, v: f64, d: String, d2: String) -> Rules:
    """recip, sqrt and exp2 of a literal are literals (where defined and finite)."""
    exact = _exact(d)
    yield rw(Recip(Fill(v, s, d)), Fill(1.0 / v, s, d), v != 0.0, *_folds(d, 1.0 / v))
    yield rw(Sqrt(Fill(v, s, d)), Fill(v**0.5, s, d), v >= 0.0, exact)
    yield rw(Exp2(Fill(v, s, d)), Fill(f64(2.0) ** v, s, d), v < 100.0, v > -100.0, exact)
    yield rw(Cast(Fill(v, s, d), d2), Fill(v, s, d2), exact, _exact(d2))


@FAMILY.rule("fill-views")
def fill_views(s: PyObject, s2: PyObject, p: PyObject, v: f64, d: String) -> Rules:
    """A view of a literal is a literal of the view's shape."""
    yield rw(Expand(Fill(v, s, d), s2), Fill(v, s2, d))
    yield rw(Reshape(Fill(v, s, d), s2), Fill(v, s2, d))
    yield rw(Permute(Fill(v, s, d), p), Fill(v, py(permute_shape)(s, p), d))
    yield rw(Slice(Fill(v, s, d), p), Fill(v, py(slice_shape)(p), d))


# ---- identities -----------------------------------------------------------------------
@FAMILY.rule("identity")
def identity(x: Tensor, z: Tensor, s: PyObject, d: String) -> Rules:
    """x*1 = x, x+0 = x, max(x, x) = x, where(c, x, x) = x."""
    yield rw(Mul(x, Fill(1.0, s, d)), x)
    yield rw(Add(x, Fill(0.0, s, d)), x)
    yield rw(Max(x, x), x)
    yield rw(Where(z, x, x), x)


@FAMILY.rule("commute")
def commute(x: Tensor, y: Tensor) -> Rules:
    """add, mul and max commute (exact in IEEE arithmetic)."""
    yield rw(Add(x, y), Add(y, x), tag=False)
    yield rw(Mul(x, y), Mul(y, x), tag=False)
    yield rw(Max(x, y), Max(y, x), tag=False)


# ---- gather constants -------------------------------------------------------------------
@FAMILY.rule("const-reassoc")
def const_reassoc(x: Tensor, y: Tensor, z: Tensor) -> Rules:
    """(x op a) op b = x op (a op b) for constant a, b: the constant part folds."""
    yield rw(Mul(Mul(x, y), z), Mul(x, Mul(y, z)), is_const(y), is_const(z))
    yield rw(Add(Add(x, y), z), Add(x, Add(y, z)), is_const(y), is_const(z))


@FAMILY.rule("scalar-reassoc")
def scalar_reassoc(x: Tensor, y: Tensor, s: PyObject, s2: PyObject, v: f64, d: String) -> Rules:
    """(expand(x)*y)*c = (expand(x)*c)*y for a literal c: a scale moves onto either
    operand of a contraction's product (only there, so literals do not spread into every
    product of the graph)."""
    yield rw(
        Mul(Mul(Expand(x, s2), y), Fill(v, s, d)),
        Mul(Mul(Expand(x, s2), Fill(v, s, d)), y),
    )


@FAMILY.rule("const-distribute")
def const_distribute(x: Tensor, y: Tensor, z: Tensor) -> Rules:
    """(x + b)*c = x*c + b*c for constant b, c: a scale moves past a bias."""
    yield rw(Mul(Add(x, y), z), Add(Mul(x, z), Mul(y, z)), is_const(y), is_const(z))


@FAMILY.rule("const-through-view")
def const_through_view(
    x: Tensor, y: Tensor, s: PyObject, s2: PyObject, p: PyObject, q: PyObject, v: f64, d: String
) -> Rules:
    """An elementwise op with a constant commutes with the view of the other operand, so
    the constant meets what is behind the view (a weight, a reduction)."""
    yield rw(
        Mul(Reshape(x, s2), y),
        Reshape(Mul(x, Reshape(y, s)), s2),
        is_const(y),
        shape(x) == s,
    )
    yield rw(
        Add(Reshape(x, s2), y),
        Reshape(Add(x, Reshape(y, s)), s2),
        is_const(y),
        shape(x) == s,
    )
    yield rw(
        Mul(Permute(x, p), y),
        Permute(Mul(x, Permute(y, py(inverse)(p))), p),
        is_const(y),
    )
    yield rw(Mul(Expand(x, s2), Fill(v, s, d)), Expand(Mul(x, Fill(v, q, d)), s2), shape(x) == q)
    yield rw(Add(Expand(x, s2), Fill(v, s, d)), Expand(Add(x, Fill(v, q, d)), s2), shape(x) == q)


@FAMILY.rule("const-into-sum")
def const_into_sum(x: Tensor, y: Tensor, s: PyObject, p: PyObject) -> Rules:
    """sum(x)*c = sum(x*c) for c constant along the reduced axes (it has the sum's shape):
    the factor reaches the contraction's operands."""
    yield rw(Mul(Sum(x, p), y), Sum(Mul(x, Expand(y, s)), p), is_const(y), shape(x) == s)


# ---- exp / log / recip ------------------------------------------------------------------
@FAMILY.rule("exp-log")
def exp_log(x: Tensor, y: Tensor) -> Rules:
    """log2(exp2(x)) = x; exp2(log2(x)) = x where x >= 0; exp2(a)*exp2(b) = exp2(a+b)."""
    yield rw(Log2(Exp2(x)), x)
    yield rw(Exp2(Log2(x)), x, nonneg(x))
    yield rw(Mul(Exp2(x), Exp2(y)), Exp2(Add(x, y)))


@FAMILY.rule("recip")
def recip(x: Tensor, y: Tensor) -> Rules:
    """1/(1/x) = x; (1/x)(1/y) = 1/(xy); sqrt(x)^2 = x where x >= 0."""
    yield rw(Recip(Recip(x)), x)
    yield rw(Mul(Recip(x), Recip(y)), Recip(Mul(x, y)))
    yield rw(Mul(Sqrt(x), Sqrt(x)), x, nonneg(x))


# ---- views ----------------------------------------------------------------------------
@FAMILY.rule("view-fold")
def view_fold(x: Tensor, s: PyObject, s2: PyObject, p: PyObject, q: PyObject) -> Rules:
    """Consecutive views of one kind compose; a view to the same shape is the operand."""
    yield rw(Permute(Permute(x, p), q), Permute(x, py(compose)(p, q)))
    yield rw(Permute(x, p), x, holds(py(is_identity)(p)))
    yield rw(
        Permute(x, p),
        Reshape(x, py(permute_shape)(s, p)),
        shape(x) == s,
        holds(py(moves_only_unit_axes)(s, p)),
    )
    yield rw(Reshape(Reshape(x, s), s2), Reshape(x, s2))
    yield rw(Reshape(x, s), x, shape(x) == s)
    yield rw(Expand(Expand(x, s), s2), Expand(x, s2))
    yield rw(Expand(x, s), x, shape(x) == s)


@FAMILY.rule("elementwise-under-expand")
def elementwise_under_expand(x: Tensor, y: Tensor, s: PyObject, q: PyObject) -> Rules:
    """f(expand(x)) = expand(f(x)): compute before broadcasting, once per source element."""
    for f in (Recip, Sqrt, Exp2, Log2):
        yield rw(f(Expand(x, s)), Expand(f(x), s))
    for g in (Mul, Add, Max):
        yield rw(g(Expand(x, s), Expand(y, s)), Expand(g(x, y), s), shape(x) == q, shape(y) == q)


# ---- casts ----------------------------------------------------------------------------
@FAMILY.rule("cast-roundtrip")
def cast_roundtrip(x: Tensor, s: PyObject, v: f64, d: String, d2: String) -> Rules:
    """Widening then narrowing is exact; an op by a literal in a wider float, cast back,
    is the op in the narrow type (one rounding instead of two)."""
    yield rw(Cast(Cast(x, d2), d), x, dtype(x) == d, holds(py(widens)(_s(d), _s(d2))))
    yield rw(
        Cast(Mul(Cast(x, d2), Fill(v, s, d2)), d),
        Mul(x, Fill(v, s, d)),
        dtype(x) == d,
        holds(py(widens)(_s(d), _s(d2))),
        holds(py(exact_float)(_s(d))),
    )


RULES = (
    fold_binary,
    fold_unary,
    fill_views,
    identity,
    commute,
    const_reassoc,
    scalar_reassoc,
    const_distribute,
    const_through_view,
    const_into_sum,
    exp_log,
    recip,
    view_fold,
    elementwise_under_expand,
    cast_roundtrip,
)
__all__ = ["FAMILY", "RULES"]
