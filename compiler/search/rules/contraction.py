"""Contraction recognition: a SUM over a MUL of broadcast (expanded) views is a
contraction (matmul, batched matmul, a convolution's windows), and these rules bring
decompositions back to that shape so the scheduler makes one blocked kernel of them.

- `recognize` tags such sums (`is_contraction`), for the per-kernel rules and the report;
- `factor-out` moves a factor that is constant along the reduced axes out of the sum: an
  einsum of three operands becomes a two-operand contraction with an elementwise epilogue,
  and a normalisation applied before a matmul moves after it (attention's softmax
  denominator multiplies P@V's [.., 64] result instead of the [.., 128] probabilities);
- `sum-merge`, `sum-unit`, `sum-through-permute` put the SUM directly over the MUL;
- `sum-split-const` splits off the constant part of a summed operand (bias @ W), which the
  decoder folds.
"""

from __future__ import annotations

from egglog import PyObject, String, eq, f64, relation, rule

from luminal.compiler.search.analyses import is_const, reduce_shape, shape
from luminal.compiler.search.rulesets import Family, Rules, holds, py
from luminal.compiler.search.terms import Add, Expand, Fill, Mul, Permute, Rmax, Sum, Tensor

is_contraction = relation("is_contraction", Tensor, egg_fn="is_contraction")


def constant_along(s: tuple[int, ...], axes: tuple[int, ...]) -> bool:
    """A tensor of shape `s` broadcasts along every reduced axis."""
    return all(s[a] == 1 for a in axes)


def merge_axes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(set(a) | set(b)))


def unit_axes(s: tuple[int, ...], axes: tuple[int, ...]) -> bool:
    return all(s[a] == 1 for a in axes)


def permute_axes(p: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """Axes of permute(x, p) seen on x."""
    return tuple(sorted(p[a] for a in axes))


FAMILY = Family("contraction")
rw = FAMILY.rewrite


@FAMILY.rule("recognize")
def recognize(a: Tensor, b: Tensor, e: Tensor, s: PyObject, p: PyObject) -> Rules:
    """sum(mul(expand(a), expand(b))) is a contraction kernel."""
    yield rule(eq(e).to(Sum(Mul(Expand(a, s), Expand(b, s)), p))).then(is_contraction(e))


@FAMILY.rule("factor-out")
def factor_out(
    x: Tensor, y: Tensor, z: Tensor, s: PyObject, t: PyObject, p: PyObject, v: f64, d: String
) -> Rules:
    """sum(x * expand(z)) = sum(x) * expand(z) when z is constant along the reduced axes;
    likewise a literal factor."""
    ro = py(reduce_shape)(s, p)
    yield rw(
        Sum(Mul(Mul(x, Expand(z, s)), y), p),
        Mul(Sum(Mul(x, y), p), Expand(z, ro)),
        shape(z) == t,
        holds(py(constant_along)(t, p)),
    )
    yield rw(
        Sum(Mul(x, Expand(z, s)), p),
        Mul(Sum(x, p), Expand(z, ro)),
        shape(z) == t,
        holds(py(constant_along)(t, p)),
    )
    yield rw(Sum(Mul(Mul(x, Fill(v, s, d)), y), p), Mul(Sum(Mul(x, y), p), Fill(v, ro, d)))
    yield rw(Sum(Mul(x, Fill(v, s, d)), p), Mul(Sum(x, p), Fill(v, ro, d)))


@FAMILY.rule("sum-merge")
def sum_merge(x: Tensor, p: PyObject, q: PyObject) -> Rules:
    """Nested reductions of one kind are one reduction over both sets of axes."""
    yield rw(Sum(Sum(x, p), q), Sum(x, py(merge_axes)(p, q)))
    yield rw(Rmax(Rmax(x, p), q), Rmax(x, py(merge_axes)(p, q)))


@FAMILY.rule("sum-unit")
def sum_unit(x: Tensor, s: PyObject, p: PyObject) -> Rules:
    """Reducing only axes of length 1 changes nothing."""
    yield rw(Sum(x, p), x, shape(x) == s, holds(py(unit_axes)(s, p)))
    yield rw(Rmax(x, p), x, shape(x) == s, holds(py(unit_axes)(s, p)))


@FAMILY.rule("sum-through-permute")
def sum_through_permute(x: Tensor, p: PyObject, q: PyObject) -> Rules:
    """sum(permute(x)) = permute(sum(x)) over the matching axes (reduced axes are kept)."""
    yield rw(Sum(Permute(x, q), p), Permute(Sum(x, py(permute_axes)(q, p)), q))


@FAMILY.rule("sum-split-const")
def sum_split_const(x: Tensor, y: Tensor, z: Tensor, p: PyObject) -> Rules:
    """sum(x + c) = sum(x) + sum(c) for constant c: the constant part folds."""
    yield rw(Sum(Add(x, y), p), Add(Sum(x, p), Sum(y, p)), is_const(y))
    yield rw(
        Sum(Mul(Add(x, y), z), p),
        Add(Sum(Mul(x, z), p), Sum(Mul(y, z), p)),
        is_const(y),
        is_const(z),
    )


RULES = (recognize, factor_out, sum_merge, sum_unit, sum_through_permute, sum_split_const)
__all__ = ["FAMILY", "RULES", "is_contraction"]
