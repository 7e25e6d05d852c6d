"""Broadcasting arithmetic and activation functions built from IR primitives."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from luminal.compiler.ir import DType, GraphBuilder, Op, Shape, Value
from luminal.errors import GraphError

LOG2_E = 1.0 / math.log(2.0)
LN_2 = math.log(2.0)


def broadcast_shapes(*shapes: Shape) -> Shape:
    """numpy's (ONNX's multidirectional) broadcasting rule."""
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        dims = {s[k - rank + len(s)] for s in shapes if k - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise GraphError(f"shapes {list(shapes)} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_to(b: GraphBuilder, x: Value, shape: Sequence[int]) -> Value:
    shape = tuple(shape)
    if x.ndim > len(shape):
        raise GraphError(f"cannot broadcast {x.shape} to {shape}")
    x = b.reshape(x, (1,) * (len(shape) - x.ndim) + x.shape)
    return b.expand(x, shape)


def full(b: GraphBuilder, value: float | int | bool, shape: Sequence[int], dtype: DType) -> Value:
    """A constant-filled tensor: one stored scalar, expanded (a view, not a copy)."""
    return broadcast_to(b, b.const(value, dtype), shape)


def like(b: GraphBuilder, value: float | int | bool, x: Value) -> Value:
    return full(b, value, x.shape, x.dtype)


def binary(b: GraphBuilder, op: Op, x: Value, y: Value) -> Value:
    shape = broadcast_shapes(x.shape, y.shape)
    return b.binary(op, broadcast_to(b, x, shape), broadcast_to(b, y, shape))


def add(b: GraphBuilder, x: Value, y: Value) -> Value:
    return binary(b, Op.ADD, x, y)


def mul(b: GraphBuilder, x: Value, y: Value) -> Value:
    return binary(b, Op.MUL, x, y)


def neg(b: GraphBuilder, x: Value) -> Value:
    if x.dtype is DType.BOOL:
        raise GraphError("cannot negate a bool tensor")
    return b.binary(Op.MUL, x, like(b, -1, x))


def sub(b: GraphBuilder, x: Value, y: Value) -> Value:
    return add(b, x, neg(b, y))


def div(b: GraphBuilder, x: Value, y: Value) -> Value:
    """True division for floats, truncating division for integers (ONNX Div).

    The IR divides as x * recip(y).  For f32 (and narrower) that product is formed in
    f64 and rounded once, which gives the correctly rounded quotient (an f32 quotient is
    never exactly halfway between two f32s, and the f64 error is far smaller than its
    distance from one); x * recip(y) in f32 itself can be an ulp off, which flips
    rounding decisions downstream (quantization, floor)."""
    if x.dtype.is_int:
        return binary(b, Op.IDIV, x, y)
    if x.dtype is DType.F64:
        return mul(b, x, b.unary(Op.RECIP, y))
    wide = mul(b, b.cast(x, DType.F64), b.unary(Op.RECIP, b.cast(y, DType.F64)))
    return b.cast(wide, x.dtype)


def maximum(b: GraphBuilder, x: Value, y: Value) -> Value:
    return binary(b, Op.MAX, x, y)


def minimum(b: GraphBuilder, x: Value, y: Value) -> Value:
    shape = broadcast_shapes(x.shape, y.shape)
    x, y = broadcast_to(b, x, shape), broadcast_to(b, y, shape)
    return b.where(b.binary(Op.CMPLT, y, x), y, x)


def less(b: GraphBuilder, x: Value, y: Value) -> Value:
    return binary(b, Op.CMPLT, x, y)


def greater(b: GraphBuilder, x: Value, y: Value) -> Value:
    return binary(b, Op.CMPLT, y, x)


def equal(b: GraphBuilder, x: Value, y: Value) -> Value:
    return binary(b, Op.CMPEQ, x, y)


def logical_not(b: GraphBuilder, x: Value) -> Value:
    return b.binary(Op.CMPEQ, x, like(b, False, x))


def logical_and(b: GraphBuilder, x: Value, y: Value) -> Value:
    return binary(b, Op.MUL, x, y)  # MUL on bool is AND


def logical_or(b: GraphBuilder, x: Value, y: Value) -> Value:
    return binary(b, Op.MAX, x, y)  # MAX on bool is OR


def logical_xor(b: GraphBuilder, x: Value, y: Value) -> Value:
    return logical_not(b, equal(b, x, y))


def where(b: GraphBuilder, cond: Value, x: Value, y: Value) -> Value:
    shape = broadcast_shapes(cond.shape, x.shape, y.shape)
    return b.where(*(broadcast_to(b, v, shape) for v in (cond, x, y)))


def abs_(b: GraphBuilder, x: Value) -> Value:
    if x.dtype is DType.BOOL:
        return x
    return b.binary(Op.MAX, x, neg(b, x))


def exp(b: GraphBuilder, x: Value) -> Value:
    return b.unary(Op.EXP2, b.binary(Op.MUL, x, like(b, LOG2_E, x)))


def log(b: GraphBuilder, x: Value) -> Value:
    return b.binary(Op.MUL, b.unary(Op.LOG2, x), like(b, LN_2, x))


def sqrt(b: GraphBuilder, x: Value) -> Value:
    return b.unary(Op.SQRT, x)


def recip(b: GraphBuilder, x: Value) -> Value:
    return b.unary(Op.RECIP, x)


def sin(b: GraphBuilder, x: Value) -> Value:
    return b.unary(Op.SIN, x)


def cos(b: GraphBuilder, x: Value) -> Value:
    return b.unary(Op.SIN, b.binary(Op.ADD, x, like(b, math.pi / 2, x)))


def pow_(b: GraphBuilder, x: Value, y: Value, exponent: float | None = None) -> Value:
    """x ** y.  A known small integer or half exponent becomes products and roots, exact
    for negative bases; otherwise exp2(y * log2(x)), NaN for negative bases like numpy."""
    if exponent is not None:
        if exponent == 0.5:
            return sqrt(b, x)
        if float(exponent).is_integer() and 0 <= exponent <= 8:
            out = like(b, 1, x)
            for _ in range(int(exponent)):
                out = b.binary(Op.MUL, out, x)
            return out
        if float(exponent).is_integer() and -8 <= exponent < 0:
            return recip(b, pow_(b, x, y, -exponent))
    if not x.dtype.is_float:
        raise GraphError("integer Pow needs a constant exponent between -8 and 8")
    y = b.cast(y, x.dtype)
    return b.unary(Op.EXP2, mul(b, y, b.unary(Op.LOG2, x)))


def relu(b: GraphBuilder, x: Value) -> Value:
    return b.binary(Op.MAX, x, like(b, 0, x))


def leaky_relu(b: GraphBuilder, x: Value, alpha: float) -> Value:
    neg_part = b.binary(Op.MUL, x, like(b, alpha, x))
    return b.where(b.binary(Op.CMPLT, x, like(b, 0, x)), neg_part, x)


def sigmoid(b: GraphBuilder, x: Value) -> Value:
    """1 / (1 + exp(-x)); saturates cleanly to 0 and 1."""
    return recip(b, b.binary(Op.ADD, like(b, 1, x), exp(b, neg(b, x))))


def tanh(b: GraphBuilder, x: Value) -> Value:
    """1 - 2 / (exp(2x) + 1); exact limits at +-inf.  Below |x| = 1/16, where that form
    cancels, the Taylor series x - x^3/3 + 2x^5/15 - 17x^7/315 (relative error < 1e-11)."""
    e = exp(b, b.binary(Op.MUL, x, like(b, 2, x)))
    frac = b.binary(Op.MUL, like(b, 2, x), recip(b, b.binary(Op.ADD, e, like(b, 1, x))))
    wide = sub(b, like(b, 1, x), frac)
    z = b.binary(Op.MUL, x, x)
    poly = like(b, -17 / 315, x)
    for coef in (2 / 15, -1 / 3, 1.0):
        poly = b.binary(Op.ADD, b.binary(Op.MUL, poly, z), like(b, coef, x))
    small = b.binary(Op.CMPLT, abs_(b, x), like(b, 0.0625, x))
    return b.where(small, b.binary(Op.MUL, poly, x), wide)


# Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7 for all x.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf(b: GraphBuilder, x: Value) -> Value:
    ax = abs_(b, x)
    t = recip(b, b.binary(Op.ADD, like(b, 1, x), b.binary(Op.MUL, ax, like(b, _ERF_P, x))))
    poly = like(b, _ERF_A[-1], x)
    for a in reversed(_ERF_A[:-1]):  # Horner: ((a5 t + a4) t + ...) t
        poly = b.binary(Op.ADD, b.binary(Op.MUL, poly, t), like(b, a, x))
    poly = b.binary(Op.MUL, poly, t)
    e = exp(b, neg(b, b.binary(Op.MUL, ax, ax)))
    y = sub(b, like(b, 1, x), b.binary(Op.MUL, poly, e))
    return b.where(b.binary(Op.CMPLT, x, like(b, 0, x)), neg(b, y), y)


def gelu(b: GraphBuilder, x: Value, approximate: str = "none") -> Value:
    half_x = b.binary(Op.MUL, x, like(b, 0.5, x))
    if approximate == "tanh":
        cube = b.binary(Op.MUL, b.binary(Op.MUL, x, x), x)
        inner = b.binary(Op.ADD, x, b.binary(Op.MUL, cube, like(b, 0.044715, x)))
        inner = b.binary(Op.MUL, inner, like(b, math.sqrt(2.0 / math.pi), x))
        return b.binary(Op.MUL, half_x, b.binary(Op.ADD, like(b, 1, x), tanh(b, inner)))
    scaled = b.binary(Op.MUL, x, like(b, 1.0 / math.sqrt(2.0), x))
    return b.binary(Op.MUL, half_x, b.binary(Op.ADD, like(b, 1, x), erf(b, scaled)))


def clip(b: GraphBuilder, x: Value, lo: Value | None, hi: Value | None) -> Value:
    if lo is not None:
        x = maximum(b, x, lo)
    if hi is not None:
        x = minimum(b, x, hi)
    return x


def mod(b: GraphBuilder, x: Value, y: Value, fmod: bool) -> Value:
    """fmod=True: sign of the dividend (C).  False: sign of the divisor (Python)."""
    shape = broadcast_shapes(x.shape, y.shape)
    x, y = broadcast_to(b, x, shape), broadcast_to(b, y, shape)
    r = b.binary(Op.MOD, x, y)
    if fmod:
        return r
    zero = like(b, 0, r)
    r_neg = b.binary(Op.CMPLT, r, zero)
    y_neg = b.binary(Op.CMPLT, y, zero)
    fix = logical_and(b, logical_not(b, b.binary(Op.CMPEQ, r, zero)), logical_xor(b, r_neg, y_neg))
    return b.where(fix, b.binary(Op.ADD, r, y), r)


def reduce_sum(b: GraphBuilder, x: Value, axes: Sequence[int], keepdims: bool = True) -> Value:
    if _reduces_empty(x, axes):
        return _drop(
            b, _empty_reduction(b, x, axes, False if x.dtype is DType.BOOL else 0), axes, keepdims
        )
    return _drop(b, b.reduce(Op.SUM, x, axes), axes, keepdims)


def reduce_max(b: GraphBuilder, x: Value, axes: Sequence[int], keepdims: bool = True) -> Value:
    if _reduces_empty(x, axes):
        return _drop(b, _empty_reduction(b, x, axes, lowest(x.dtype)), axes, keepdims)
    return _drop(b, b.reduce(Op.RMAX, x, axes), axes, keepdims)


def lowest(dtype: DType) -> float | int | bool:
    """The identity of max: -inf, the type's minimum, or False."""
    if dtype is DType.BOOL:
        return False
    return -math.inf if dtype.is_float else int(np.iinfo(dtype.np).min)


def _reduces_empty(x: Value, axes: Sequence[int]) -> bool:
    return any(x.shape[a % max(x.ndim, 1)] == 0 for a in axes) if x.ndim else False


def _empty_reduction(
    b: GraphBuilder, x: Value, axes: Sequence[int], identity: float | int | bool
) -> Value:
    """A reduction over an empty axis is its identity everywhere (sum 0, max -inf)."""
    dropped = {a % x.ndim for a in axes}
    return full(b, identity, [1 if k in dropped else d for k, d in enumerate(x.shape)], x.dtype)


def reduce_min(b: GraphBuilder, x: Value, axes: Sequence[int], keepdims: bool = True) -> Value:
    if x.dtype is DType.BOOL:
        return logical_not(b, reduce_max(b, logical_not(b, x), axes, keepdims))
    return neg(b, reduce_max(b, neg(b, x), axes, keepdims))


def reduce_mean(b: GraphBuilder, x: Value, axes: Sequence[int], keepdims: bool = True) -> Value:
    count = math.prod(x.shape[a] for a in {a % max(x.ndim, 1) for a in axes})
    s = reduce_sum(b, x, axes, keepdims)
    return b.binary(Op.MUL, s, like(b, 1.0 / max(count, 1), s))


def _drop(b: GraphBuilder, x: Value, axes: Sequence[int], keepdims: bool) -> Value:
    if keepdims:
        return x
    dropped = {a % max(x.ndim, 1) for a in axes}
    return b.reshape(x, tuple(d for k, d in enumerate(x.shape) if k not in dropped))
