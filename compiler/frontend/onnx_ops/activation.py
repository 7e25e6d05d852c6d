"""More ONNX elementwise ops: activations, rounding, trigonometry, NaN/Inf tests, bits."""

from __future__ import annotations

from collections.abc import Callable

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import special as sp
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, GraphBuilder, Op, Value


def _float_unary(fn: Callable[[GraphBuilder, Value], Value]) -> Lowering:
    def lower(ctx: NodeContext) -> list[Value]:
        x = ctx.input(0)
        if not x.dtype.is_float:
            raise ctx.unsupported(f"{x.dtype.value} input (floating point only)")
        return [fn(ctx.b, x)]

    return lower


def _selu(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.67326319217681884765625))
    gamma = float(ctx.attr("gamma", 1.05070102214813232421875))
    neg = m.mul(b, m.sub(b, m.exp(b, x), m.like(b, 1, x)), m.like(b, alpha, x))
    y = b.where(b.binary(Op.CMPLT, m.like(b, 0, x), x), x, neg)
    return [m.mul(b, y, m.like(b, gamma, x))]


def _celu(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    neg = m.mul(b, sp.expm1(b, m.mul(b, x, m.like(b, 1 / alpha, x))), m.like(b, alpha, x))
    return [m.add(b, m.relu(b, x), m.minimum(b, m.like(b, 0, x), neg))]


def _thresholded_relu(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    return [b.where(b.binary(Op.CMPLT, m.like(b, alpha, x), x), x, m.like(b, 0, x))]


def _shrink(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    bias, lambd = float(ctx.attr("bias", 0.0)), float(ctx.attr("lambd", 0.5))
    low = b.binary(Op.CMPLT, x, m.like(b, -lambd, x))
    high = b.binary(Op.CMPLT, m.like(b, lambd, x), x)
    if x.dtype.is_float:
        lo_v, hi_v = m.add(b, x, m.like(b, bias, x)), m.sub(b, x, m.like(b, bias, x))
    else:
        lo_v, hi_v = m.add(b, x, m.like(b, int(bias), x)), m.sub(b, x, m.like(b, int(bias), x))
    return [b.where(low, lo_v, b.where(high, hi_v, m.like(b, 0, x)))]


def _mish(b: GraphBuilder, x: Value) -> Value:
    softplus = m.add(b, m.relu(b, x), sp.log1p(b, m.exp(b, m.neg(b, m.abs_(b, x)))))
    return m.mul(b, x, m.tanh(b, softplus))


def _swish(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    return [m.mul(b, x, m.sigmoid(b, m.mul(b, x, m.like(b, alpha, x))))]


def _swiglu(ctx: NodeContext) -> list[Value]:
    b, x, gate = ctx.b, ctx.input(0), ctx.input(1)
    if x.shape != gate.shape:
        raise ctx.error(f"inputs differ in shape: {x.shape} vs {gate.shape}")
    alpha = float(ctx.attr("alpha", 1.0))
    return [m.mul(b, m.mul(b, x, m.sigmoid(b, m.mul(b, x, m.like(b, alpha, x)))), gate)]


def _prelu(ctx: NodeContext) -> list[Value]:
    b, x, slope = ctx.b, ctx.input(0), ctx.input(1)
    if slope.ndim == 1 and x.ndim > 2 and slope.shape[0] == x.shape[1] != x.shape[-1]:
        # opset <= 6 (and its converted models): a 1-D slope is per channel
        slope = b.reshape(slope, (slope.shape[0], *([1] * (x.ndim - 2))))
    neg = m.mul(b, x, slope)
    x = m.broadcast_to(b, x, neg.shape)
    return [b.where(b.binary(Op.CMPLT, x, m.like(b, 0, x)), neg, x)]


def _is_inf(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    pos, neg = int(ctx.attr("detect_positive", 1)), int(ctx.attr("detect_negative", 1))
    if not x.dtype.is_float:
        return [m.full(b, False, x.shape, DType.BOOL)]
    out = m.full(b, False, x.shape, DType.BOOL)
    if pos:
        out = m.logical_or(b, out, b.binary(Op.CMPEQ, x, m.like(b, float("inf"), x)))
    if neg:
        out = m.logical_or(b, out, b.binary(Op.CMPEQ, x, m.like(b, float("-inf"), x)))
    return [out]


def _bitshift(ctx: NodeContext) -> list[Value]:
    direction = ctx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be LEFT or RIGHT, got {direction!r}")
    x = ctx.input(0)
    if not x.dtype.is_int:
        raise ctx.unsupported(f"{x.dtype.value} input (integers only)")
    return [sp.shift(ctx.b, x, ctx.input(1), direction == "LEFT")]


def _bitwise(op: str) -> Lowering:
    def lower(ctx: NodeContext) -> list[Value]:
        x = ctx.input(0)
        if x.dtype is DType.BOOL:
            fn = {"and": m.logical_and, "or": m.logical_or, "xor": m.logical_xor}.get(op)
            if fn is None:
                return [m.logical_not(ctx.b, x)]
            return [fn(ctx.b, x, ctx.input(1))]
        if not x.dtype.is_int:
            raise ctx.unsupported(f"{x.dtype.value} input (integers only)")
        y = ctx.input(1) if op != "not" else None
        return [sp.bitwise(ctx.b, op, x, y)]

    return lower


OPS: dict[str, Lowering] = {
    "Selu": _selu,
    "Celu": _celu,
    "ThresholdedRelu": _thresholded_relu,
    "Shrink": _shrink,
    "Mish": _float_unary(_mish),
    "Swish": _swish,
    "SwiGLU": _swiglu,
    "PRelu": _prelu,
    "Floor": _float_unary(sp.floor),
    "Ceil": _float_unary(sp.ceil),
    "Round": _float_unary(sp.round_half_even),
    "IsNaN": _float_unary(sp.is_nan),
    "IsInf": _is_inf,
    "Tan": _float_unary(sp.tan),
    "Asin": _float_unary(sp.asin),
    "Acos": _float_unary(sp.acos),
    "Atan": _float_unary(sp.atan),
    "Sinh": _float_unary(sp.sinh),
    "Cosh": _float_unary(sp.cosh),
    "Asinh": _float_unary(sp.asinh),
    "Acosh": _float_unary(sp.acosh),
    "Atanh": _float_unary(sp.atanh),
    "BitShift": _bitshift,
    "BitwiseAnd": _bitwise("and"),
    "BitwiseOr": _bitwise("or"),
    "BitwiseXor": _bitwise("xor"),
    "BitwiseNot": _bitwise("not"),
}
