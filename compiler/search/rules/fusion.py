"""Fusion rewrites: reshape the graph so the scheduler fuses more into fewer kernels.

- `views-distribute` and `view-swap` move a broadcast factor (a softmax denominator, a
  LayerNorm scale or shift) through the views in front of a contraction, where
  `contraction.factor-out` lifts it into the contraction's epilogue and
  `algebra.const-into-sum` folds a constant one into the weights (LayerNorm's gamma and
  beta into the next matmul's weights and bias).  Attention's softmax normalisation thus
  runs in the P@V epilogue, and the probabilities are never written.
- `norm-one-pass` turns a variance sum((x - mean)^2) into sum(x^2) - n mean^2, so the
  centred tensor is no longer read by two kernels and is not materialized: a LayerNorm
  becomes two reductions over x plus one elementwise pass.  (E[x^2] - E[x]^2 loses
  precision when |mean| >> std; the backends accumulate f32 sums in f64.)
- `horizontal` joins sibling contractions that read the same operand with different
  constant weights (attention's Q, K and V projections) into one contraction over the
  concatenated weights, read back through slices.
"""

from __future__ import annotations

import math

from egglog import PyObject, String, eq, f64, function, rule, set_, union

from luminal.compiler.search.analyses import is_const, permute_shape, shape
from luminal.compiler.search.rulesets import Family, Rules, holds, made, py
from luminal.compiler.search.terms import (
    Add,
    Concat,
    Const,
    Expand,
    Fill,
    Mul,
    Permute,
    Reshape,
    Slice,
    Sum,
    Tensor,
)


def reshape_under_expand(z: tuple[int, ...], t: tuple[int, ...], s: tuple[int, ...]):  # type: ignore[no-untyped-def]
    """Shape r with reshape(expand(z, t), s) == expand(reshape(z, r), s), or None.

    t and s are cut into runs of dims with equal products; a run is either all broadcast
    in z (it becomes 1s) or all present (it keeps s's dims)."""
    r: list[int] = []
    i = j = 0
    try:
        while i < len(t) or j < len(s):
            if j < len(s) and s[j] == 1:
                r.append(1)
                j += 1
                continue
            if i < len(t) and t[i] == 1:
                i += 1
                continue
            run_t, run_s = [i], [j]
            pt, ps = t[i], s[j]
            i, j = i + 1, j + 1
            while pt != ps:
                if pt < ps:
                    run_t.append(i)
                    pt *= t[i]
                    i += 1
                else:
                    run_s.append(j)
                    ps *= s[j]
                    j += 1
            present = [z[k] != 1 for k in run_t if t[k] != 1]
            if all(present):
                r.extend(s[k] for k in run_s)
            elif not any(present):
                r.extend(1 for _ in run_s)
            else:
                return None
    except IndexError:
        return None
    return tuple(r)


def is_some(value: object) -> bool:
    return value is not None


def mean_coefficient(s: tuple[int, ...], axes: tuple[int, ...], text: str) -> bool:
    """The literal is -1/n for n the number of reduced elements: x + c*sum(x) centres x."""
    n = math.prod(s[a] for a in axes)
    return abs(float(text) * n + 1.0) < 1e-6


def stack_axis(
    x: tuple[int, ...], w1: tuple[int, ...], w2: tuple[int, ...], axes: tuple[int, ...]
) -> int:
    """The output axis two sibling contractions' weights can be joined on: kept (not
    reduced), broadcast in the shared operand x, present in both weights, and the only
    axis where the weights differ.  -1 when there is none."""
    if not len(x) == len(w1) == len(w2):
        return -1
    found = [k for k in range(len(x)) if k not in axes and x[k] == 1 and w1[k] > 1 and w2[k] > 1]
    if len(found) != 1:
        return -1
    k = found[0]
    same = all(w1[i] == w2[i] for i in range(len(x)) if i != k)
    return k if same else -1


def grow(s: tuple[int, ...], axis: int, extra: tuple[int, ...]) -> tuple[int, ...]:
    """s with its `axis` lengthened by extra[axis]."""
    return (*s[:axis], s[axis] + extra[axis], *s[axis + 1 :])


def positive(k: int) -> bool:
    return k >= 0


def slices(s: tuple[int, ...], axis: int, first: tuple[int, ...], second: tuple[int, ...]):  # type: ignore[no-untyped-def]
    """Slice specs (arg, shape) of the two parts of a tensor of shape s joined on axis."""

    def spec(start: int, length: int):  # type: ignore[no-untyped-def]
        arg = tuple((start if k == axis else 0, 1) for k in range(len(s)))
        return (arg, (*s[:axis], length, *s[axis + 1 :]))

    return spec(0, first[axis]), spec(first[axis], second[axis])


def first(pair: tuple) -> object:  # type: ignore[type-arg]
    return pair[0]


def second(pair: tuple) -> object:  # type: ignore[type-arg]
    return pair[1]


def compose_slices(outer: tuple, inner: tuple) -> tuple:  # type: ignore[type-arg]
    """slice(slice(x, outer), inner) == slice(x, compose_slices(outer, inner))."""
    (a_arg, _), (b_arg, b_shape) = outer, inner
    arg = tuple((sa + ta * sb, ta * tb) for (sa, ta), (sb, tb) in zip(a_arg, b_arg, strict=True))
    return (arg, b_shape)


def _weight_keys_decl(w: Tensor) -> PyObject: ...


def ordered_apart(a: frozenset[str], b: frozenset[str]) -> bool:
    """Weights with no constant in common, in one canonical order (so each set of
    siblings is joined once per grouping, and a joined weight never takes a part again)."""
    return not (a & b) and min(a) < min(b)


def keys_of(key: str) -> frozenset[str]:
    return frozenset((key,))


def union_keys(a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
    return a | b


#: weight_keys(w): the original constants a weight is made of (a Const, or Concats of them).
weight_keys = function(merge=lambda old, new: old, egg_fn="weight_keys")(_weight_keys_decl)


FAMILY = Family("fusion")
rw = FAMILY.rewrite


@FAMILY.rule("views-distribute")
def views_distribute(x: Tensor, z: Tensor, s: PyObject, t: PyObject, p: PyObject) -> Rules:
    """A view of x * expand(z) is the view of x times the view of the broadcast factor."""
    for op in (Mul, Add):
        yield rw(Reshape(op(x, Expand(z, t)), s), op(Reshape(x, s), Reshape(Expand(z, t), s)))
        yield rw(Expand(op(x, Expand(z, t)), s), op(Expand(x, s), Expand(z, s)))
        yield rw(
            Permute(op(x, Expand(z, t)), p),
            op(Permute(x, p), Permute(Expand(z, t), p)),
        )


@FAMILY.rule("view-swap")
def view_swap(z: Tensor, s: PyObject, t: PyObject, p: PyObject, q: PyObject) -> Rules:
    """Views commute with a broadcast, so the broadcast factor stays an expand."""
    r = py(reshape_under_expand)(q, t, s)
    yield rw(
        Reshape(Expand(z, t), s), Expand(Reshape(z, r), s), shape(z) == q, holds(py(is_some)(r))
    )
    yield rw(Permute(Expand(z, t), p), Expand(Permute(z, p), py(permute_shape)(t, p)))


@FAMILY.rule("norm-one-pass")
def norm_one_pass(
    x: Tensor, s: PyObject, t: PyObject, p: PyObject, q: PyObject, v: f64, d: String
) -> Rules:
    """sum((x + m)^2) = sum(x^2) + m^2/c for m = c*sum(x), c = -1/n (a variance): the row
    sum is then read only by m, so m is its reduction's epilogue."""
    m = Mul(Sum(x, p), Fill(v, t, d))
    centred = Add(x, Expand(m, s))
    yield rw(
        Sum(Mul(centred, centred), p),
        Add(Sum(Mul(x, x), p), Mul(Mul(m, m), Fill(1.0 / v, t, d))),
        shape(x) == q,
        holds(py(mean_coefficient)(q, p, PyObject.from_string(v.to_string()))),
    )


@FAMILY.rule("horizontal")
def horizontal(
    x: Tensor,
    w1: Tensor,
    w2: Tensor,
    c1: Tensor,
    c2: Tensor,
    e1: Tensor,
    e2: Tensor,
    f1: Tensor,
    f2: Tensor,
    s1: PyObject,
    s2: PyObject,
    p: PyObject,
    q: PyObject,
    sw1: PyObject,
    sw2: PyObject,
    o1: PyObject,
    o2: PyObject,
    n1: PyObject,
    n2: PyObject,
    a: PyObject,
    b: PyObject,
    key: String,
) -> Rules:
    """Two contractions of one operand with constant weights (and constant biases) are one
    contraction over the weights joined on an output axis, read through slices."""
    k = py(stack_axis)(q, sw1, sw2, p)
    wide = py(grow)(s1, k, s2)
    joined = Sum(Mul(Expand(x, wide), Expand(Concat(w1, w2, k), wide)), p)
    specs = py(slices)(py(grow)(o1, k, o2), k, o1, o2)
    sp1, sp2 = py(first)(specs), py(second)(specs)
    siblings = (
        eq(e1).to(Sum(Mul(Expand(x, s1), Expand(w1, s1)), p)),
        eq(e2).to(Sum(Mul(Expand(x, s2), Expand(w2, s2)), p)),
        weight_keys(w1) == n1,
        weight_keys(w2) == n2,
        holds(py(ordered_apart)(n1, n2)),
        shape(x) == q,
        shape(w1) == sw1,
        shape(w2) == sw2,
        shape(e1) == o1,
        shape(e2) == o2,
        holds(py(positive)(k)),
    )
    yield rule(*siblings).then(
        union(e1).with_(Slice(joined, sp1)),
        union(e2).with_(Slice(joined, sp2)),
        made(e1, FAMILY.name),
        made(e2, FAMILY.name),
    )
    biased = Add(joined, Concat(c1, c2, k))
    yield rule(
        *siblings,
        eq(f1).to(Add(e1, c1)),
        eq(f2).to(Add(e2, c2)),
        is_const(c1),
        is_const(c2),
    ).then(
        union(f1).with_(Slice(biased, sp1)),
        union(f2).with_(Slice(biased, sp2)),
        made(f1, FAMILY.name),
        made(f2, FAMILY.name),
    )
    yield rw(Slice(Slice(x, a), b), Slice(x, py(compose_slices)(a, b)))
    yield rule(eq(w1).to(Const(key))).then(
        set_(weight_keys(w1)).to(py(keys_of)(PyObject.from_string(key)))
    )
    yield rule(eq(w1).to(Concat(c1, c2, a)), weight_keys(c1) == n1, weight_keys(c2) == n2).then(
        set_(weight_keys(w1)).to(py(union_keys)(n1, n2))
    )


RULES = (views_distribute, view_swap, norm_one_pass, horizontal)
__all__ = ["FAMILY", "RULES"]
