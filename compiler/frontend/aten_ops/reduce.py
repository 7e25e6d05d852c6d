"""ATen reductions.  An empty or missing `dim` list reduces every axis, as in torch."""

from __future__ import annotations

from collections.abc import Callable

from luminal.compiler.frontend.aten_ops.context import AtenContext, Lowering, Result
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import DType, GraphBuilder, Op, Value

Reducer = Callable[[GraphBuilder, Value, list[int], bool], Value]


def _axes(ctx: AtenContext, x: Value) -> list[int]:
    dims = ctx.args.get("dim")
    if dims is None or dims == []:
        return list(range(x.ndim))
    dims = [dims] if isinstance(dims, int) else dims
    return sorted({int(d) % max(x.ndim, 1) for d in dims})


def _reduction(fn: Reducer, float_math: bool = False) -> Lowering:
    """sum / mean / amax / amin: the input cast to the result type, then reduced."""

    def lower(ctx: AtenContext) -> Value:
        dt = ctx.compute_dtype() if float_math else ctx.out_dtype
        if dt in (DType.F16, DType.BF16):
            dt = DType.F32  # accumulate low-precision floats in float32, like torch
        x = ctx.operand("self", dt)
        if x.ndim == 0:
            return x
        return fn(ctx.b, x, _axes(ctx, x), bool(ctx.arg("keepdim", False)))

    return lower


def _bool_reduction(all_: bool) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        b, x = ctx.b, ctx.operand("self", DType.BOOL)
        if x.ndim == 0:
            return x
        axes, keep = _axes(ctx, x), bool(ctx.arg("keepdim", False))
        if all_:
            return m.logical_not(b, m.reduce_max(b, m.logical_not(b, x), axes, keep))
        return m.reduce_max(b, x, axes, keep)

    return lower


def arg_extreme(b: GraphBuilder, x: Value, axis: int, keep: bool, largest: bool) -> Value:
    """Index of the first maximum (minimum) along `axis`, as int64."""
    best = m.reduce_max(b, x, [axis]) if largest else m.reduce_min(b, x, [axis])
    hit = b.binary(Op.CMPEQ, x, b.expand(best, x.shape))
    index = b.iota(x.shape, axis)
    miss = m.like(b, x.shape[axis], index)
    first = m.reduce_min(b, b.where(hit, index, miss), [axis])
    return first if keep else b.reshape(first, tuple(d for k, d in enumerate(x.shape) if k != axis))


def _arg_reduce(largest: bool) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        b, x = ctx.b, ctx.tensor("self")
        keep = bool(ctx.arg("keepdim", False))
        dim = ctx.args.get("dim")
        if dim is None:
            flat = b.reshape(x, (max(1, _numel(x)),))
            out = arg_extreme(b, flat, 0, False, largest)
            return b.reshape(out, (1,) * x.ndim) if keep else out
        if x.ndim == 0:
            return b.const(0, DType.I64)
        return arg_extreme(b, x, int(dim) % x.ndim, keep, largest)

    return lower


def _numel(x: Value) -> int:
    total = 1
    for d in x.shape:
        total *= d
    return total


def _value_and_index(largest: bool) -> Lowering:
    """max.dim / min.dim: (values, indices)."""

    def lower(ctx: AtenContext) -> Result:
        b, x = ctx.b, ctx.tensor("self")
        keep = bool(ctx.arg("keepdim", False))
        if x.ndim == 0:
            return (x, b.const(0, DType.I64))
        axis = int(ctx.arg("dim")) % x.ndim
        fn = m.reduce_max if largest else m.reduce_min
        return (fn(b, x, [axis], keep), arg_extreme(b, x, axis, keep, largest))

    return lower


def _variance(ctx: AtenContext, x: Value) -> tuple[Value, Value]:
    """(var, mean) with keepdim applied; Bessel-style `correction` (default 1)."""
    b = ctx.b
    axes, keep = _axes(ctx, x), bool(ctx.arg("keepdim", False))
    correction = ctx.args.get("correction")
    if correction is None:
        correction = 1 if ctx.args.get("unbiased", True) else 0
    count = 1
    for a in axes:
        count *= x.shape[a]
    mean = m.reduce_mean(b, x, axes, keepdims=True)
    centred = m.sub(b, x, mean)
    total = m.reduce_sum(b, m.mul(b, centred, centred), axes, keep)
    var = m.mul(b, total, m.like(b, 1.0 / max(count - float(correction), 0.0), total))
    if not keep:
        mean = b.reshape(mean, var.shape)
    return var, mean


def _var(ctx: AtenContext) -> Value:
    return _variance(ctx, ctx.operand("self", ctx.compute_dtype()))[0]


def _std(ctx: AtenContext) -> Value:
    return m.sqrt(ctx.b, _var(ctx))


def _var_mean(ctx: AtenContext) -> Result:
    return _variance(ctx, ctx.operand("self", ctx.compute_dtype()))


def _cumsum(ctx: AtenContext) -> Value:
    """Prefix sums as a masked SUM over a [.., n, n] view (small n only)."""
    b = ctx.b
    dt = ctx.out_dtype
    x = ctx.operand("self", DType.F32 if dt in (DType.F16, DType.BF16) else dt)
    if x.ndim == 0:
        return x
    axis = int(ctx.arg("dim")) % x.ndim
    n = x.shape[axis]
    perm = [k for k in range(x.ndim) if k != axis] + [axis]
    moved = b.permute(x, perm)
    lead = moved.shape[:-1]
    rows = b.expand(b.reshape(moved, (*lead, 1, n)), (*lead, n, n))  # [.., i, k] = x[k]
    keep = m.broadcast_to(
        b, m.logical_not(b, b.binary(Op.CMPLT, b.iota((n, n), 0), b.iota((n, n), 1))), rows.shape
    )  # k <= i
    summed = m.reduce_sum(b, b.where(keep, rows, m.like(b, 0, rows)), [-1], keepdims=False)
    inverse = [perm.index(k) for k in range(x.ndim)]
    return b.permute(summed, inverse)


OPS: dict[str, Lowering] = {
    "aten.sum.dim_IntList": _reduction(m.reduce_sum),
    "aten.sum.default": _reduction(m.reduce_sum),
    "aten.mean.dim": _reduction(m.reduce_mean, float_math=True),
    "aten.mean.default": _reduction(m.reduce_mean, float_math=True),
    "aten.amax.default": _reduction(m.reduce_max),
    "aten.amin.default": _reduction(m.reduce_min),
    "aten.max.default": _reduction(m.reduce_max),
    "aten.min.default": _reduction(m.reduce_min),
    "aten.max.dim": _value_and_index(largest=True),
    "aten.min.dim": _value_and_index(largest=False),
    "aten.argmax.default": _arg_reduce(largest=True),
    "aten.argmin.default": _arg_reduce(largest=False),
    "aten.any.default": _bool_reduction(all_=False),
    "aten.any.dim": _bool_reduction(all_=False),
    "aten.any.dims": _bool_reduction(all_=False),
    "aten.all.default": _bool_reduction(all_=True),
    "aten.all.dim": _bool_reduction(all_=True),
    "aten.all.dims": _bool_reduction(all_=True),
    "aten.var.correction": _var,
    "aten.var.dim": _var,
    "aten.std.correction": _std,
    "aten.std.dim": _std,
    "aten.var_mean.correction": _var_mean,
    "aten.cumsum.default": _cumsum,
}
