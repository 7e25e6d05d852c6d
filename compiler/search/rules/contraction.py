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

from egglog import PyObject, String, eq, f64, relation, rule, var, vars_

from luminal.compiler.search.analyses import is_const, reduce_shape, shape
from luminal.compiler.search.rulesets import Family, holds, py
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


def build() -> Family:
    fam = Family("contraction")
    rw = fam.rewrite
    x, y, z, a, b, e = vars_("x y z a b e", Tensor)
    s, t, p, q = vars_("s t p q", PyObject)
    v = var("v", f64)
    d = var("d", String)

    fam.add(
        "recognize",
        "sum(mul(expand(a), expand(b))) is a contraction kernel.",
        rule(eq(e).to(Sum(Mul(Expand(a, s), Expand(b, s)), p))).then(is_contraction(e)),
    )
    ro = py(reduce_shape)(s, p)
    fam.add(
        "factor-out",
        "sum(x * expand(z)) = sum(x) * expand(z) when z is constant along the reduced "
        "axes; likewise a literal factor.",
        rw(
            Sum(Mul(Mul(x, Expand(z, s)), y), p),
            Mul(Sum(Mul(x, y), p), Expand(z, ro)),
            shape(z) == t,
            holds(py(constant_along)(t, p)),
        ),
        rw(
            Sum(Mul(x, Expand(z, s)), p),
            Mul(Sum(x, p), Expand(z, ro)),
            shape(z) == t,
            holds(py(constant_along)(t, p)),
        ),
        rw(Sum(Mul(Mul(x, Fill(v, s, d)), y), p), Mul(Sum(Mul(x, y), p), Fill(v, ro, d))),
        rw(Sum(Mul(x, Fill(v, s, d)), p), Mul(Sum(x, p), Fill(v, ro, d))),
    )
    fam.add(
        "sum-merge",
        "Nested reductions of one kind are one reduction over both sets of axes.",
        rw(Sum(Sum(x, p), q), Sum(x, py(merge_axes)(p, q))),
        rw(Rmax(Rmax(x, p), q), Rmax(x, py(merge_axes)(p, q))),
    )
    fam.add(
        "sum-unit",
        "Reducing only axes of length 1 changes nothing.",
        rw(Sum(x, p), x, shape(x) == s, holds(py(unit_axes)(s, p))),
        rw(Rmax(x, p), x, shape(x) == s, holds(py(unit_axes)(s, p))),
    )
    fam.add(
        "sum-through-permute",
        "sum(permute(x)) = permute(sum(x)) over the matching axes (reduced axes are kept).",
        rw(Sum(Permute(x, q), p), Permute(Sum(x, py(permute_axes)(q, p)), q)),
    )
    fam.add(
        "sum-split-const",
        "sum(x + c) = sum(x) + sum(c) for constant c: the constant part folds.",
        rw(Sum(Add(x, y), p), Add(Sum(x, p), Sum(y, p)), is_const(y)),
        rw(
            Sum(Mul(Add(x, y), z), p),
            Add(Sum(Mul(x, z), p), Sum(Mul(y, z), p)),
            is_const(y),
            is_const(z),
        ),
    )
    return fam


_FAMILY = build()
RULES = tuple(_FAMILY.rules)
__all__ = ["RULES", "build", "is_contraction"]
