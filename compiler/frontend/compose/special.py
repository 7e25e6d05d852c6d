"""Rounding, inverse trigonometric and hyperbolic functions, and bit operations, built
from IR primitives.

Rounding goes through a truncating cast, guarded so that values already integral in their
type (|x| >= 2^mantissa, infinities, NaN) pass through unchanged.  Transcendentals use
argument reduction plus a short polynomial (Cephes' single-precision coefficients):
about 1e-7 relative error, i.e. float32 accuracy.  Bit operations work on the unsigned
type of the same width, where C and numpy both wrap, one bit plane per slot of a new axis.
"""

from __future__ import annotations

import math

import numpy as np

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import DType, GraphBuilder, Op, Value
from luminal.errors import GraphError

#: Magnitude from which every float of the type is an integer.
_INTEGRAL = {DType.F64: 2.0**52, DType.F32: 2.0**23, DType.F16: 2.0**10, DType.BF16: 2.0**7}
UNSIGNED = {
    DType.I8: DType.U8,
    DType.I16: DType.U16,
    DType.I32: DType.U32,
    DType.I64: DType.U64,
    DType.U8: DType.U8,
    DType.U16: DType.U16,
    DType.U32: DType.U32,
    DType.U64: DType.U64,
}


def _c(b: GraphBuilder, value: float, x: Value) -> Value:
    return m.like(b, value, x)


def floor(b: GraphBuilder, x: Value) -> Value:
    if not x.dtype.is_float:
        return x
    t = b.cast(b.cast(x, DType.I64), x.dtype)  # truncation toward zero
    below = b.cast(b.binary(Op.CMPLT, x, t), x.dtype)
    small = b.binary(Op.CMPLT, m.abs_(b, x), _c(b, _INTEGRAL[x.dtype], x))
    return b.where(small, m.sub(b, t, below), x)


def ceil(b: GraphBuilder, x: Value) -> Value:
    return m.neg(b, floor(b, m.neg(b, x))) if x.dtype.is_float else x


def round_half_even(b: GraphBuilder, x: Value) -> Value:
    if not x.dtype.is_float:
        return x
    f = floor(b, x)
    frac = m.sub(b, x, f)
    half = _c(b, 0.5, x)
    up = m.add(b, f, _c(b, 1, x))
    f_odd = b.binary(Op.CMPEQ, b.binary(Op.MOD, f, _c(b, 2, x)), _c(b, 0, x))  # f even
    tie = b.where(f_odd, f, up)
    r = b.where(b.binary(Op.CMPLT, half, frac), up, b.where(b.binary(Op.CMPLT, frac, half), f, tie))
    small = b.binary(Op.CMPLT, m.abs_(b, x), _c(b, _INTEGRAL[x.dtype], x))
    return b.where(small, r, x)


def is_nan(b: GraphBuilder, x: Value) -> Value:
    if not x.dtype.is_float:
        return m.like(b, False, b.cast(x, DType.BOOL))
    return m.logical_not(b, b.binary(Op.CMPEQ, x, x))


def log1p(b: GraphBuilder, x: Value) -> Value:
    """log(1 + x), accurate for small x (Kahan: log(w) * x / (w - 1) with w = 1 + x)."""
    w = m.add(b, _c(b, 1, x), x)
    wm1 = m.sub(b, w, _c(b, 1, x))
    exact = b.binary(Op.CMPEQ, wm1, _c(b, 0, x))
    safe = b.where(exact, _c(b, 1, x), wm1)
    scaled = m.mul(b, m.log(b, w), m.div(b, x, safe))
    inf = b.binary(Op.CMPEQ, w, _c(b, math.inf, x))
    return b.where(exact, x, b.where(inf, w, scaled))


def expm1(b: GraphBuilder, x: Value) -> Value:
    """exp(x) - 1, accurate for small x (Kahan: (u - 1) * x / log(u) with u = exp(x))."""
    u = m.exp(b, x)
    um1 = m.sub(b, u, _c(b, 1, x))
    one = b.binary(Op.CMPEQ, u, _c(b, 1, x))
    logu = m.log(b, u)
    safe = b.where(one, _c(b, 1, x), logu)
    scaled = m.mul(b, um1, m.div(b, x, safe))
    big = b.binary(Op.CMPLT, _c(b, 0.5, x), m.abs_(b, x))  # no cancellation: plain form
    return b.where(one, x, b.where(big, um1, scaled))


def atan(b: GraphBuilder, x: Value) -> Value:
    ax = m.abs_(b, x)
    big = b.binary(Op.CMPLT, _c(b, 2.414213562373095, x), ax)  # tan(3 pi / 8)
    mid = b.binary(Op.CMPLT, _c(b, 0.4142135623730950, x), ax)  # tan(pi / 8)
    safe_ax = b.where(big, ax, _c(b, 1, x))
    t = b.where(
        big,
        m.neg(b, m.recip(b, safe_ax)),
        b.where(mid, m.div(b, m.sub(b, ax, _c(b, 1, x)), m.add(b, ax, _c(b, 1, x))), ax),
    )
    base = b.where(big, _c(b, math.pi / 2, x), b.where(mid, _c(b, math.pi / 4, x), _c(b, 0, x)))
    z = m.mul(b, t, t)
    poly = _c(b, 8.05374449538e-2, x)
    for coef in (-1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1):
        poly = m.add(b, m.mul(b, poly, z), _c(b, coef, x))
    y = m.add(b, base, m.add(b, m.mul(b, m.mul(b, poly, z), t), t))
    y = b.where(b.binary(Op.CMPEQ, ax, _c(b, math.inf, x)), _c(b, math.pi / 2, x), y)
    return b.where(b.binary(Op.CMPLT, x, _c(b, 0, x)), m.neg(b, y), y)


def asin(b: GraphBuilder, x: Value) -> Value:
    one = _c(b, 1, x)
    return atan(b, m.div(b, x, m.sqrt(b, m.mul(b, m.sub(b, one, x), m.add(b, one, x)))))


def acos(b: GraphBuilder, x: Value) -> Value:
    one = _c(b, 1, x)
    return m.mul(b, _c(b, 2, x), atan(b, m.sqrt(b, m.div(b, m.sub(b, one, x), m.add(b, one, x)))))


def sinh(b: GraphBuilder, x: Value) -> Value:
    return m.mul(b, m.sub(b, expm1(b, x), expm1(b, m.neg(b, x))), _c(b, 0.5, x))


def cosh(b: GraphBuilder, x: Value) -> Value:
    return m.mul(b, m.add(b, m.exp(b, x), m.exp(b, m.neg(b, x))), _c(b, 0.5, x))


def asinh(b: GraphBuilder, x: Value) -> Value:
    ax = m.abs_(b, x)
    # asinh(a) = log1p(a + a^2 / (1 + sqrt(1 + a^2)))
    root = m.sqrt(b, m.add(b, _c(b, 1, x), m.mul(b, ax, ax)))
    y = log1p(b, m.add(b, ax, m.div(b, m.mul(b, ax, ax), m.add(b, _c(b, 1, x), root))))
    big = b.binary(Op.CMPLT, _c(b, 1e18, x), ax)  # a^2 overflows: log(2a)
    y = b.where(big, m.add(b, m.log(b, ax), _c(b, math.log(2.0), x)), y)
    return b.where(b.binary(Op.CMPLT, x, _c(b, 0, x)), m.neg(b, y), y)


def acosh(b: GraphBuilder, x: Value) -> Value:
    one = _c(b, 1, x)
    return m.log(b, m.add(b, x, m.sqrt(b, m.mul(b, m.sub(b, x, one), m.add(b, x, one)))))


def atanh(b: GraphBuilder, x: Value) -> Value:
    one = _c(b, 1, x)
    ratio = m.div(b, m.mul(b, _c(b, 2, x), x), m.sub(b, one, x))
    return m.mul(b, log1p(b, ratio), _c(b, 0.5, x))


def tan(b: GraphBuilder, x: Value) -> Value:
    return m.div(b, m.sin(b, x), m.cos(b, x))


# ---- bits ------------------------------------------------------------------------------


def _bit_planes(b: GraphBuilder, x: Value) -> tuple[Value, Value]:
    """(bits of x along a new last axis as 0/1 in the unsigned type, the place values)."""
    ut = UNSIGNED.get(x.dtype)
    if ut is None:
        raise GraphError(f"bit operations need an integer type, got {x.dtype.value}")
    width = ut.itemsize * 8
    xu = b.cast(x, ut)
    places = b.const(np.array([1 << k for k in range(width)], dtype=np.uint64).astype(ut.np))
    shape = (*x.shape, width)
    xe = b.expand(b.reshape(xu, (*x.shape, 1)), shape)
    pe = m.broadcast_to(b, places, shape)
    two = m.full(b, 2, shape, ut)
    return b.binary(Op.MOD, b.binary(Op.IDIV, xe, pe), two), pe


def bitwise(b: GraphBuilder, op: str, x: Value, y: Value | None = None) -> Value:
    """and, or, xor of two integer tensors, or not of one."""
    if x.dtype is DType.BOOL:
        raise GraphError("bitwise ops on bool: use the logical ops")
    if y is not None:
        shape = m.broadcast_shapes(x.shape, y.shape)
        x, y = m.broadcast_to(b, x, shape), m.broadcast_to(b, y, shape)
    bx, places = _bit_planes(b, x)
    if op == "not":
        bits = m.sub(b, m.like(b, 1, bx), bx)
    else:
        assert y is not None
        by, _ = _bit_planes(b, y)
        if op == "and":
            bits = b.binary(Op.MUL, bx, by)
        elif op == "or":
            bits = b.binary(Op.MAX, bx, by)
        elif op == "xor":
            bits = b.binary(Op.MOD, b.binary(Op.ADD, bx, by), m.like(b, 2, bx))
        else:
            raise GraphError(f"unknown bitwise op '{op}'")
    total = m.reduce_sum(b, b.binary(Op.MUL, bits, places), [-1], keepdims=False)
    return b.cast(total, x.dtype)


def shift(b: GraphBuilder, x: Value, y: Value, left: bool) -> Value:
    """x << y or x >> y (arithmetic for signed x); a shift outside [0, width) gives 0
    (or -1 for a negative x shifted right), as numpy and the ONNX reference do."""
    shape = m.broadcast_shapes(x.shape, y.shape)
    x, y = m.broadcast_to(b, x, shape), m.broadcast_to(b, y, shape)
    width = x.dtype.itemsize * 8
    signed = x.dtype not in UNSIGNED.values()
    yi = b.cast(y, DType.I64) if y.dtype is not DType.U64 else y
    if y.dtype is DType.U64:
        yi = b.cast(m.minimum(b, y, m.like(b, width, y)), DType.I64)
    top = width - 1 if signed and not left else width
    valid = m.logical_and(
        b,
        m.logical_not(b, b.binary(Op.CMPLT, yi, m.like(b, 0, yi))),
        b.binary(Op.CMPLT, yi, m.like(b, top, yi)),
    )
    index = b.where(valid, yi, m.like(b, 0, yi))
    if left or not signed:
        ut = UNSIGNED[x.dtype]
        table = b.const(np.array([1 << k for k in range(width)], np.uint64).astype(ut.np))
        p = b.gather(table, index, 0)
        xu = b.cast(x, ut)
        moved = b.binary(Op.MUL, xu, p) if left else b.binary(Op.IDIV, xu, p)
        return b.where(valid, b.cast(moved, x.dtype), m.like(b, 0, x))
    table = b.const(np.array([1 << k for k in range(width - 1)], np.int64))
    p = b.gather(table, index, 0)
    xi = b.cast(x, DType.I64)
    q = b.binary(Op.IDIV, xi, p)
    rem_neg = b.binary(Op.CMPLT, b.binary(Op.MOD, xi, p), m.like(b, 0, xi))
    floor_q = m.sub(b, q, b.cast(rem_neg, DType.I64))
    fill = b.where(b.binary(Op.CMPLT, x, m.like(b, 0, x)), m.like(b, -1, x), m.like(b, 0, x))
    return b.where(valid, b.cast(floor_q, x.dtype), fill)


def int_pow(b: GraphBuilder, x: Value, y: Value) -> Value:
    """x ** y for integer x, as numpy computes it: binary exponentiation (wrapping like C
    and numpy) for integral y >= 0; a float power truncated for fractional y; for
    negative y the truncated value (1 for x = 1, +-1 for x = -1, else 0)."""
    shape = m.broadcast_shapes(x.shape, y.shape)
    x, y = m.broadcast_to(b, x, shape), m.broadcast_to(b, y, shape)
    e = b.cast(y, DType.I64) if y.dtype is not DType.U64 else y
    width = 64 if e.dtype is DType.U64 else 63
    nonneg = m.logical_not(b, b.binary(Op.CMPLT, e, m.like(b, 0, e)))
    ep = b.where(nonneg, e, m.like(b, 0, e))
    result = m.like(b, 1, x)
    square = x
    for k in range(width):
        bit = b.binary(Op.MOD, b.binary(Op.IDIV, ep, m.like(b, 1 << k, ep)), m.like(b, 2, ep))
        on = b.binary(Op.CMPEQ, bit, m.like(b, 1, bit))
        result = b.where(on, b.binary(Op.MUL, result, square), result)
        if k + 1 < width:
            square = b.binary(Op.MUL, square, square)
    one = b.binary(Op.CMPEQ, x, m.like(b, 1, x))
    unsigned = x.dtype in (DType.U8, DType.U16, DType.U32, DType.U64)
    if unsigned:
        minus_one = m.full(b, False, x.shape, DType.BOOL)
    else:
        minus_one = b.binary(Op.CMPEQ, x, m.like(b, -1, x))
    even = b.binary(Op.CMPEQ, b.binary(Op.MOD, e, m.like(b, 2, e)), m.like(b, 0, e))
    sign = b.where(even, m.like(b, 1, x), m.like(b, -1 if not unsigned else 1, x))
    negative = b.where(one, m.like(b, 1, x), b.where(minus_one, sign, m.like(b, 0, x)))
    out = b.where(nonneg, result, negative)
    if y.dtype.is_float:
        integral = b.binary(Op.CMPEQ, floor(b, y), y)
        wide = b.cast(y, DType.F64)
        real = m.pow_(b, b.cast(x, DType.F64), wide)
        out = b.where(integral, out, b.cast(real, x.dtype))
    return out
