"""Softmax and normalisations, written in their numerically stable forms."""

from __future__ import annotations

from collections.abc import Sequence

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import GraphBuilder, Op, Value


def softmax(b: GraphBuilder, x: Value, axis: int) -> Value:
    shifted = _shift(b, x, axis)
    e = m.exp(b, shifted)
    total = b.expand(b.reduce(Op.SUM, e, [axis]), x.shape)
    return b.binary(Op.MUL, e, b.unary(Op.RECIP, total))


def log_softmax(b: GraphBuilder, x: Value, axis: int) -> Value:
    shifted = _shift(b, x, axis)
    total = b.expand(b.reduce(Op.SUM, m.exp(b, shifted), [axis]), x.shape)
    return m.sub(b, shifted, m.log(b, total))


def _shift(b: GraphBuilder, x: Value, axis: int) -> Value:
    top = b.expand(b.reduce(Op.RMAX, x, [axis]), x.shape)
    return m.sub(b, x, top)


def layer_norm(
    b: GraphBuilder,
    x: Value,
    scale: Value | None,
    bias: Value | None,
    axes: Sequence[int],
    eps: float,
) -> Value:
    mean = b.expand(m.reduce_mean(b, x, axes), x.shape)
    centred = m.sub(b, x, mean)
    var = m.reduce_mean(b, b.binary(Op.MUL, centred, centred), axes)
    inv = b.unary(Op.RECIP, b.unary(Op.SQRT, b.binary(Op.ADD, var, m.like(b, eps, var))))
    y = b.binary(Op.MUL, centred, b.expand(inv, x.shape))
    if scale is not None:
        y = m.mul(b, y, scale)
    if bias is not None:
        y = m.add(b, y, bias)
    return y


def batch_norm(
    b: GraphBuilder, x: Value, scale: Value, bias: Value, mean: Value, var: Value, eps: float
) -> Value:
    """Inference BatchNorm over axis 1: x * (scale / sqrt(var + eps)) + (bias - mean * that).
    With constant statistics the per-channel factors fold to two small constants."""
    per_channel = (1, x.shape[1], *([1] * (x.ndim - 2)))
    inv = b.unary(Op.RECIP, b.unary(Op.SQRT, b.binary(Op.ADD, var, m.like(b, eps, var))))
    factor = b.binary(Op.MUL, scale, inv)
    shift = m.sub(b, bias, b.binary(Op.MUL, mean, factor))
    y = m.mul(b, x, b.reshape(factor, per_channel))
    return m.add(b, y, b.reshape(shift, per_channel))
