"""ONNX elementwise ops: arithmetic, comparisons, logic, activations, Cast, Clip."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import special as sp
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, GraphBuilder, Value


def _binary(fn: Callable[[GraphBuilder, Value, Value], Value]) -> Lowering:
    return lambda ctx: [fn(ctx.b, ctx.input(0), ctx.input(1))]


def _unary(fn: Callable[[GraphBuilder, Value], Value], floats_only: bool = True) -> Lowering:
    def lower(ctx: NodeContext) -> list[Value]:
        x = ctx.input(0)
        if floats_only and not x.dtype.is_float:
            raise ctx.unsupported(f"{x.dtype.value} input (floating point only)")
        return [fn(ctx.b, x)]

    return lower


def _variadic(fn: Callable[[GraphBuilder, Value, Value], Value]) -> Lowering:
    def lower(ctx: NodeContext) -> list[Value]:
        xs = [ctx.input(i) for i in range(len(ctx.inputs))]
        out = xs[0]
        for x in xs[1:]:
            out = fn(ctx.b, out, x)
        return [out]

    return lower


def _mean(ctx: NodeContext) -> list[Value]:
    (total,) = _variadic(m.add)(ctx)
    return [m.mul(ctx.b, total, ctx.b.const(1.0 / len(ctx.inputs), total.dtype))]


def _pow(ctx: NodeContext) -> list[Value]:
    x, y = ctx.input(0), ctx.input(1)
    value = ctx.b.const_value(y)
    exponent = float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None
    small = exponent is not None and float(exponent).is_integer() and -8 <= exponent <= 8
    if x.dtype.is_int and not small:
        return [sp.int_pow(ctx.b, x, y)]
    out = m.pow_(ctx.b, x, y, exponent)
    return [m.broadcast_to(ctx.b, out, m.broadcast_shapes(x.shape, y.shape))]


def _mod(ctx: NodeContext) -> list[Value]:
    fmod = bool(ctx.attr("fmod", 0))
    x = ctx.input(0)
    if x.dtype.is_float and not fmod and ctx.opset < 28:
        raise ctx.error("Mod on floating point inputs requires fmod=1 before opset 28")
    return [m.mod(ctx.b, x, ctx.input(1), fmod)]


def _leaky_relu(ctx: NodeContext) -> list[Value]:
    return [m.leaky_relu(ctx.b, ctx.input(0), float(ctx.attr("alpha", 0.01)))]


def _gelu(ctx: NodeContext) -> list[Value]:
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.unsupported(f"approximate='{approximate}'")
    return [m.gelu(ctx.b, ctx.input(0), approximate)]


def _hard_sigmoid(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    alpha, beta = float(ctx.attr("alpha", 0.2)), float(ctx.attr("beta", 0.5))
    y = m.add(b, m.mul(b, x, m.like(b, alpha, x)), m.like(b, beta, x))
    return [m.clip(b, y, m.like(b, 0, x), m.like(b, 1, x))]


def _cast(ctx: NodeContext) -> list[Value]:
    ctx.attr("saturate")  # only meaningful for float8 targets, which are unsupported anyway
    return [ctx.b.cast(ctx.input(0), ctx.dtype(ctx.attr("to")))]


def _cast_like(ctx: NodeContext) -> list[Value]:
    ctx.attr("saturate")
    return [ctx.b.cast(ctx.input(0), ctx.input(1).dtype)]


def _clip(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    if ctx.opset < 11:
        lo = b.const(ctx.attr("min", -np.inf), x.dtype)
        hi = b.const(ctx.attr("max", np.inf), x.dtype)
        return [m.clip(b, x, lo, hi)]
    return [m.clip(b, x, ctx.optional(1), ctx.optional(2))]


def _softplus(b: GraphBuilder, x: Value) -> Value:
    # log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)): no overflow.
    tail = sp.log1p(b, m.exp(b, m.neg(b, m.abs_(b, x))))
    return m.add(b, m.relu(b, x), tail)


def _softsign(b: GraphBuilder, x: Value) -> Value:
    return m.div(b, x, m.add(b, m.like(b, 1, x), m.abs_(b, x)))


def _elu(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    neg_part = m.mul(b, m.sub(b, m.exp(b, x), m.like(b, 1, x)), m.like(b, alpha, x))
    return [m.where(b, m.less(b, x, m.like(b, 0, x)), neg_part, x)]


def _hard_swish(b: GraphBuilder, x: Value) -> Value:
    y = m.add(b, m.mul(b, x, m.like(b, 1 / 6, x)), m.like(b, 0.5, x))
    return m.mul(b, x, m.clip(b, y, m.like(b, 0, x), m.like(b, 1, x)))


def _sign(b: GraphBuilder, x: Value) -> Value:
    pos = b.cast(m.less(b, m.like(b, 0, x), x), x.dtype)
    neg = b.cast(m.less(b, x, m.like(b, 0, x)), x.dtype)
    return m.sub(b, pos, neg)


OPS: dict[str, Lowering] = {
    "Add": _binary(m.add),
    "Sub": _binary(m.sub),
    "Mul": _binary(m.mul),
    "Div": _binary(m.div),
    "Pow": _pow,
    "Mod": _mod,
    "Max": _variadic(m.maximum),
    "Min": _variadic(m.minimum),
    "Sum": _variadic(m.add),
    "Mean": _mean,
    "Equal": _binary(m.equal),
    "Less": _binary(m.less),
    "Greater": _binary(m.greater),
    "LessOrEqual": _binary(lambda b, x, y: m.logical_not(b, m.greater(b, x, y))),
    "GreaterOrEqual": _binary(lambda b, x, y: m.logical_not(b, m.less(b, x, y))),
    "And": _binary(m.logical_and),
    "Or": _binary(m.logical_or),
    "Xor": _binary(m.logical_xor),
    "Not": _unary(m.logical_not, floats_only=False),
    "Neg": _unary(m.neg, floats_only=False),
    "Abs": _unary(m.abs_, floats_only=False),
    "Sign": _unary(_sign, floats_only=False),
    "Reciprocal": _unary(m.recip),
    "Sqrt": _unary(m.sqrt),
    "Exp": _unary(m.exp),
    "Log": _unary(m.log),
    "Sin": _unary(m.sin),
    "Cos": _unary(m.cos),
    "Tanh": _unary(m.tanh),
    "Sigmoid": _unary(m.sigmoid),
    "Relu": _unary(m.relu, floats_only=False),
    "LeakyRelu": _leaky_relu,
    "Elu": _elu,
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _unary(_hard_swish),
    "Softplus": _unary(_softplus),
    "Softsign": _unary(_softsign),
    "Erf": _unary(m.erf),
    "Gelu": _gelu,
    "Cast": _cast,
    "CastLike": _cast_like,
    "Clip": _clip,
    "Where": lambda ctx: [m.where(ctx.b, ctx.input(0), ctx.input(1), ctx.input(2))],
}

__all__ = ["OPS", "DType"]
