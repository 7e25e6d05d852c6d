"""ONNX normalisations: layer, RMS, instance, group, mean-variance, local response."""

from __future__ import annotations

from collections.abc import Sequence

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import GraphBuilder, Op, Value


def standardize(
    b: GraphBuilder, x: Value, axes: Sequence[int], eps: float
) -> tuple[Value, Value, Value]:
    """(x - mean) / sqrt(var + eps) over `axes`, with the mean and 1/std (kept dims)."""
    mean = m.reduce_mean(b, x, axes)
    centred = m.sub(b, x, mean)
    var = m.reduce_mean(b, b.binary(Op.MUL, centred, centred), axes)
    inv = m.recip(b, m.sqrt(b, m.add(b, var, m.like(b, eps, var))))
    return m.mul(b, centred, inv), mean, inv


def _axis(ctx: NodeContext, x: Value, default: int) -> int:
    axis = int(ctx.attr("axis", default))
    if not -x.ndim <= axis < x.ndim:
        raise ctx.error(f"axis {axis} out of range for rank {x.ndim}")
    return axis % x.ndim


def _layer_norm(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    axis = _axis(ctx, x, -1)
    ctx.attr("stash_type")  # f16 and bf16 inputs are normalised in f32 already
    eps = float(ctx.attr("epsilon", 1e-5))
    y, mean, inv = standardize(b, x, list(range(axis, x.ndim)), eps)
    y = m.mul(b, y, ctx.input(1))
    bias = ctx.optional(2)
    if bias is not None:
        y = m.add(b, y, bias)
    return [y, mean, inv]


def _rms_norm(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    axis = _axis(ctx, x, -1)
    ctx.attr("stash_type")
    eps = float(ctx.attr("epsilon", 1e-5))
    mean_sq = m.reduce_mean(b, b.binary(Op.MUL, x, x), list(range(axis, x.ndim)))
    inv = m.recip(b, m.sqrt(b, m.add(b, mean_sq, m.like(b, eps, mean_sq))))
    return [m.mul(b, m.mul(b, x, inv), ctx.input(1))]


def _per_channel(b: GraphBuilder, v: Value, x: Value) -> Value:
    return b.reshape(v, (1, x.shape[1], *([1] * (x.ndim - 2))))


def _instance_norm(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    eps = float(ctx.attr("epsilon", 1e-5))
    y, _, _ = standardize(b, x, list(range(2, x.ndim)), eps)
    y = m.mul(b, y, _per_channel(b, ctx.input(1), x))
    return [m.add(b, y, _per_channel(b, ctx.input(2), x))]


def _group_norm(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    groups = int(ctx.attr("num_groups"))
    eps = float(ctx.attr("epsilon", 1e-5))
    ctx.attr("stash_type")
    n, c = x.shape[:2]
    if groups <= 0 or c % groups:
        raise ctx.error(f"{c} channels do not split into {groups} groups")
    grouped = b.reshape(x, (n, groups, c // groups, *x.shape[2:]))
    y, _, _ = standardize(b, grouped, list(range(2, grouped.ndim)), eps)
    y = b.reshape(y, x.shape)
    scale, bias = ctx.input(1), ctx.input(2)
    if ctx.opset < 21 and scale.shape == (groups,):  # one scale and bias per group
        scale = b.reshape(b.expand(b.reshape(scale, (groups, 1)), (groups, c // groups)), (c,))
        bias = b.reshape(b.expand(b.reshape(bias, (groups, 1)), (groups, c // groups)), (c,))
    y = m.mul(b, y, _per_channel(b, scale, x))
    return [m.add(b, y, _per_channel(b, bias, x))]


def _mvn(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    axes = [a % x.ndim for a in ctx.attr("axes", [0, 2, 3])]
    mean = m.reduce_mean(b, x, axes)
    centred = m.sub(b, x, mean)
    var = m.reduce_mean(b, b.binary(Op.MUL, centred, centred), axes)
    return [m.div(b, centred, m.add(b, m.sqrt(b, var), m.like(b, 1e-9, var)))]


def _lrn(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    size = int(ctx.attr("size"))
    alpha, beta = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    c = x.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = b.binary(Op.MUL, x, x)
    padded = b.pad(sq, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2), 0.0)
    total: Value | None = None
    for k in range(size):
        part = b.slice(padded, [(0, 1, x.shape[0]), (k, 1, c)] + [(0, 1, d) for d in x.shape[2:]])
        total = part if total is None else b.binary(Op.ADD, total, part)
    assert total is not None
    base = m.add(b, m.like(b, bias, x), m.mul(b, total, m.like(b, alpha / size, x)))
    return [m.div(b, x, m.pow_(b, base, m.like(b, beta, x), beta))]


OPS: dict[str, Lowering] = {
    "LayerNormalization": _layer_norm,
    "RMSNormalization": _rms_norm,
    "InstanceNormalization": _instance_norm,
    "GroupNormalization": _group_norm,
    "MeanVarianceNormalization": _mvn,
    "LRN": _lrn,
}
