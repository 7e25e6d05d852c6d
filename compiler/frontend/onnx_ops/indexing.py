"""ONNX indexing, scan, arg-extreme and selection ops."""

from __future__ import annotations

import numpy as np

from luminal.compiler.frontend.compose import gather as gx
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import shape
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, Op, Value


def _axis(ctx: NodeContext, x: Value, default: int = 0) -> int:
    axis = int(ctx.attr("axis", default))
    if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
        raise ctx.error(f"axis {axis} out of range for rank {x.ndim}")
    return axis % max(x.ndim, 1)


def _reduction(ctx: NodeContext) -> str:
    reduction = ctx.attr("reduction", "none")
    if reduction not in gx.REDUCTIONS:
        raise ctx.unsupported(f"reduction='{reduction}'")
    return str(reduction)


def _gather_elements(ctx: NodeContext) -> list[Value]:
    data = ctx.input(0)
    return [gx.gather_elements(ctx.b, data, ctx.input(1), _axis(ctx, data))]


def _scatter_elements(ctx: NodeContext) -> list[Value]:
    data = ctx.input(0)
    reduction = _reduction(ctx)
    out = gx.scatter_elements(ctx.b, data, ctx.input(1), ctx.input(2), _axis(ctx, data), reduction)
    return [out]


def _scatter_nd(ctx: NodeContext) -> list[Value]:
    return [gx.scatter_nd(ctx.b, ctx.input(0), ctx.input(1), ctx.input(2), _reduction(ctx))]


def _gather_nd(ctx: NodeContext) -> list[Value]:
    batch_dims = int(ctx.attr("batch_dims", 0))
    return [gx.gather_nd(ctx.b, ctx.input(0), ctx.input(1), batch_dims)]


def _arg(largest: bool) -> Lowering:
    def lower(ctx: NodeContext) -> list[Value]:
        x = ctx.input(0)
        keep = bool(ctx.attr("keepdims", 1))
        last = bool(ctx.attr("select_last_index", 0))
        if x.dtype is DType.BOOL:
            x = ctx.b.cast(x, DType.U8)
        return [gx.arg_extreme(ctx.b, x, _axis(ctx, x), largest, keep, last)]

    return lower


def _cumulative(prod: bool) -> Lowering:
    def lower(ctx: NodeContext) -> list[Value]:
        x = ctx.input(0)
        axis = ctx.ints(1, "axis")
        if axis is None or len(axis) != 1:
            raise ctx.error("axis must be a scalar")
        if not -x.ndim <= axis[0] < x.ndim:
            raise ctx.error(f"axis {axis[0]} out of range for rank {x.ndim}")
        exclusive, reverse = bool(ctx.attr("exclusive", 0)), bool(ctx.attr("reverse", 0))
        return [gx.cumulative(ctx.b, x, axis[0] % x.ndim, exclusive, reverse, prod)]

    return lower


def _one_hot(ctx: NodeContext) -> list[Value]:
    b, indices = ctx.b, ctx.input(0)
    depth_v = ctx.const(1, "depth")
    values = ctx.input(2)
    assert depth_v is not None
    depth = int(np.asarray(depth_v).reshape(-1)[0])
    axis = int(ctx.attr("axis", -1))
    rank = indices.ndim + 1
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    idx = b.cast(indices, DType.I64)  # float indices truncate, as the reference does
    idx = b.where(
        b.binary(Op.CMPLT, idx, m.like(b, 0, idx)), m.add(b, idx, m.like(b, depth, idx)), idx
    )
    out_shape = (*indices.shape[:axis], depth, *indices.shape[axis:])
    target = m.broadcast_to(
        b, b.reshape(idx, (*indices.shape[:axis], 1, *indices.shape[axis:])), out_shape
    )
    hit = b.binary(Op.CMPEQ, b.iota(out_shape, axis), target)
    flat = b.reshape(values, (2,))
    off = m.broadcast_to(b, b.slice(flat, [(0, 1, 1)]), out_shape)
    on = m.broadcast_to(b, b.slice(flat, [(1, 1, 1)]), out_shape)
    return [b.where(hit, on, off)]


def _topk(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    if ctx.opset < 10:
        k = int(ctx.attr("k"))
    else:
        ks = ctx.ints(1, "K")
        if ks is None or len(ks) != 1:
            raise ctx.error("K must hold one value")
        k = ks[0]
    largest = bool(ctx.attr("largest", 1))
    ctx.attr("sorted")  # sorted=0 allows any order; sorted is one of them
    axis = _axis(ctx, x, -1)
    values, indices = gx.topk(ctx.b, x, k, axis, largest)
    return [values, indices]


def _hardmax(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    if ctx.opset >= 13:
        axis = _axis(ctx, x, -1)
        flat = x
    else:
        axis = _axis(ctx, x, 1)
        flat = shape.flatten(b, x, axis)
        axis = 1
    if 0 in flat.shape:
        return [x]
    best = gx.arg_extreme(b, flat, axis, True, True, False)
    hit = b.binary(Op.CMPEQ, b.iota(flat.shape, axis), b.expand(best, flat.shape))
    out = b.cast(hit, x.dtype)
    return [b.reshape(out, x.shape)]


def _reverse_sequence(ctx: NodeContext) -> list[Value]:
    b, x, lens = ctx.b, ctx.input(0), ctx.input(1)
    batch_axis, time_axis = int(ctx.attr("batch_axis", 1)), int(ctx.attr("time_axis", 0))
    t = b.iota(x.shape, time_axis)
    length = b.reshape(
        b.cast(lens, DType.I64),
        tuple(x.shape[batch_axis] if k == batch_axis else 1 for k in range(x.ndim)),
    )
    length = b.expand(length, x.shape)
    inside = b.binary(Op.CMPLT, t, length)
    src = m.sub(b, m.sub(b, length, m.like(b, 1, length)), t)
    index = b.where(inside, src, t)
    return [gx.gather_elements(b, x, index, time_axis)]


def _eye_like(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    if x.ndim != 2:
        raise ctx.error(f"EyeLike needs a 2-D input, got rank {x.ndim}")
    dtype = ctx.dtype(ctx.attr("dtype")) if ctx.has_attr("dtype") else x.dtype
    k = int(ctx.attr("k", 0))
    return [ctx.b.const(np.eye(*x.shape, k=k, dtype=dtype.np))]


def _compress(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    cond = ctx.const(1, "condition")
    assert cond is not None
    picked = np.flatnonzero(np.asarray(cond).reshape(-1))
    if ctx.has_attr("axis"):
        axis = _axis(ctx, x)
        data = x
    else:
        axis, data = 0, b.reshape(x, (int(np.prod(x.shape)),))
    if picked.size and picked.max() >= data.shape[axis]:
        raise ctx.error("condition is longer than the axis it selects on")
    return [b.gather(data, b.const(picked.astype(np.int64)), axis)]


def _lp_normalization(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    p = int(ctx.attr("p", 2))
    axis = _axis(ctx, x, -1)
    if p == 1:
        total = m.reduce_sum(b, m.abs_(b, x), [axis])
    elif p == 2:
        total = m.sqrt(b, m.reduce_sum(b, b.binary(Op.MUL, x, x), [axis]))
    else:
        raise ctx.unsupported(f"p={p} (1 or 2)")
    zero = b.binary(Op.CMPEQ, total, m.like(b, 0, total))
    safe = b.where(zero, m.like(b, 1, total), total)
    return [m.where(b, zero, m.like(b, 0, x), m.div(b, x, safe))]


OPS: dict[str, Lowering] = {
    "GatherElements": _gather_elements,
    "ScatterElements": _scatter_elements,
    "Scatter": _scatter_elements,
    "ScatterND": _scatter_nd,
    "GatherND": _gather_nd,
    "ArgMax": _arg(True),
    "ArgMin": _arg(False),
    "CumSum": _cumulative(False),
    "CumProd": _cumulative(True),
    "OneHot": _one_hot,
    "TopK": _topk,
    "Hardmax": _hardmax,
    "ReverseSequence": _reverse_sequence,
    "EyeLike": _eye_like,
    "Compress": _compress,
    "LpNormalization": _lp_normalization,
}
