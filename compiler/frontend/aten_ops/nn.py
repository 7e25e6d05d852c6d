"""ATen neural-network ops: matmuls, convolution, pooling, softmax and normalisation.

Ops with several results (native_layer_norm, max_pool2d_with_indices, ...) return a
tuple with None for results we do not compute; reading one of those (getitem) is
reported as unsupported by the walker.
"""

from __future__ import annotations

from collections.abc import Sequence

from luminal.compiler.frontend.aten_ops.context import AtenContext, Lowering, Result
from luminal.compiler.frontend.compose import contraction, norm, windows
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import Value


def _float(ctx: AtenContext, name: str) -> Value:
    return ctx.operand(name, ctx.compute_dtype())


def _matmul(a: str, w: str) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        dt = ctx.out_dtype
        return contraction.matmul(ctx.b, ctx.operand(a, dt), ctx.operand(w, dt))

    return lower


def _addmm(ctx: AtenContext) -> Value:
    """addmm / baddbmm: beta * self + alpha * (batch1 @ batch2)."""
    dt = ctx.out_dtype
    a, w = ("mat1", "mat2") if "mat1" in ctx.args else ("batch1", "batch2")
    return contraction.gemm(
        ctx.b,
        ctx.operand(a, dt),
        ctx.operand(w, dt),
        ctx.operand("self", dt),
        alpha=float(ctx.arg("alpha", 1)),
        beta=float(ctx.arg("beta", 1)),
    )


def _linear(ctx: AtenContext) -> Value:
    dt = ctx.out_dtype
    x, w = ctx.operand("input", dt), ctx.operand("weight", dt)
    y = contraction.matmul(ctx.b, x, ctx.b.permute(w, list(range(w.ndim))[::-1]))
    bias = ctx.optional("bias")
    return y if bias is None else m.add(ctx.b, y, ctx.b.cast(bias, dt))


def _per_axis(ctx: AtenContext, name: str, nd: int, default: int) -> list[int]:
    """An int[] argument of a pooling/conv op, with a single value meaning every axis."""
    values = ctx.ints(name)
    if not values:
        return [default] * nd
    if len(values) == 1:
        return values * nd
    if len(values) != nd:
        raise ctx.error(f"'{name}' has {len(values)} entries for {nd} spatial axes")
    return values


def _convolution(ctx: AtenContext) -> Value:
    if ctx.arg("transposed", False):
        raise ctx.unsupported("transposed convolution is not supported")
    dt = ctx.out_dtype
    x, w = ctx.operand("input", dt), ctx.operand("weight", dt)
    bias = ctx.optional("bias")
    nd = w.ndim - 2
    strides = _per_axis(ctx, "stride", nd, 1)
    padding = _per_axis(ctx, "padding", nd, 0)
    dilation = _per_axis(ctx, "dilation", nd, 1)
    pads = [(p, p) for p in padding]
    groups = int(ctx.arg("groups", 1))
    bias = None if bias is None else ctx.b.cast(bias, dt)
    return contraction.conv(ctx.b, x, w, bias, strides, pads, dilation, groups)


def _pool_args(
    ctx: AtenContext, x: Value, nd: int
) -> tuple[list[int], list[int], list[int], list[tuple[int, int]], list[tuple[int, int]]]:
    kernel = _per_axis(ctx, "kernel_size", nd, 1)
    strides = ctx.ints("stride") or list(kernel)
    strides = strides * nd if len(strides) == 1 else strides
    padding = _per_axis(ctx, "padding", nd, 0)
    dilation = _per_axis(ctx, "dilation", nd, 1)
    real = [(p, p) for p in padding]
    pads = real
    if ctx.arg("ceil_mode", False):
        pads = windows.ceil_pads(x.shape[-nd:], kernel, strides, dilation, real)
    return kernel, strides, dilation, pads, real


def _max_pool(nd: int, indices: bool = True) -> Lowering:
    """max_pool*_with_indices gives (values, indices); we compute the values only."""

    def lower(ctx: AtenContext) -> Result:
        x = ctx.tensor("self")
        kernel, strides, dilation, pads, _ = _pool_args(ctx, x, nd)
        y = windows.max_pool(ctx.b, x, kernel, strides, pads, dilation)
        return (y, None) if indices else y

    return lower


def _avg_pool(nd: int) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        x = _float(ctx, "self")
        kernel, strides, dilation, pads, real = _pool_args(ctx, x, nd)
        include = bool(ctx.arg("count_include_pad", True))
        divisor = ctx.arg("divisor_override")
        if divisor is None:
            return windows.avg_pool(ctx.b, x, kernel, strides, pads, dilation, include, real)
        win = windows.windows(ctx.b, x, kernel, strides, dilation, pads, 0.0)
        total = m.reduce_sum(ctx.b, win, list(range(win.ndim - nd, win.ndim)), keepdims=False)
        return m.mul(ctx.b, total, m.like(ctx.b, 1.0 / float(divisor), total))

    return lower


def _adaptive_avg_pool(nd: int) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        x = _float(ctx, "self")
        spatial = x.shape[-nd:]
        out = _per_axis(ctx, "output_size", nd, 1)
        if any(o <= 0 or i % o for i, o in zip(spatial, out, strict=True)):
            raise ctx.unsupported(
                f"adaptive pooling from {list(spatial)} to {out} (only evenly dividing sizes)"
            )
        kernel = [i // o for i, o in zip(spatial, out, strict=True)]
        ones, zero = [1] * nd, [(0, 0)] * nd
        return windows.avg_pool(ctx.b, x, kernel, kernel, zero, ones, False)

    return lower


def _softmax(log: bool) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        x = _float(ctx, "self")
        axis = int(ctx.arg("dim")) % max(x.ndim, 1)
        if x.ndim == 0:
            return m.like(ctx.b, 0.0 if log else 1.0, x)
        return (norm.log_softmax if log else norm.softmax)(ctx.b, x, axis)

    return lower


def _optional_float(ctx: AtenContext, name: str) -> Value | None:
    v = ctx.optional(name)
    return None if v is None else ctx.b.cast(v, ctx.compute_dtype())


def _layer_norm(ctx: AtenContext) -> Result:
    x = _float(ctx, "input")
    k = len(ctx.ints("normalized_shape"))
    axes = list(range(x.ndim - k, x.ndim))
    eps = float(ctx.arg("eps", 1e-5))
    w, bias = _optional_float(ctx, "weight"), _optional_float(ctx, "bias")
    return (norm.layer_norm(ctx.b, x, w, bias, axes, eps), None, None)


def _batch_norm_no_training(ctx: AtenContext) -> Result:
    b, x = ctx.b, _float(ctx, "input")
    channels = (x.shape[1],)
    w = _optional_float(ctx, "weight") or m.full(b, 1.0, channels, x.dtype)
    bias = _optional_float(ctx, "bias") or m.full(b, 0.0, channels, x.dtype)
    mean, var = _optional_float(ctx, "running_mean"), _optional_float(ctx, "running_var")
    if mean is None or var is None:
        raise ctx.unsupported("batch norm without running statistics")
    eps = float(ctx.arg("eps", 1e-5))
    return (norm.batch_norm(b, x, w, bias, mean, var, eps), None, None)


def _group_norm(ctx: AtenContext) -> Result:
    b, x = ctx.b, _float(ctx, "input")
    n, c, groups = x.shape[0], x.shape[1], int(ctx.arg("group"))
    eps = float(ctx.arg("eps", 1e-5))
    grouped = b.reshape(x, (n, groups, _rest(x.shape, groups)))
    y = b.reshape(norm.layer_norm(b, grouped, None, None, [2], eps), x.shape)
    per_channel = (1, c, *([1] * (x.ndim - 2)))
    w, bias = _optional_float(ctx, "weight"), _optional_float(ctx, "bias")
    if w is not None:
        y = m.mul(b, y, b.reshape(w, per_channel))
    if bias is not None:
        y = m.add(b, y, b.reshape(bias, per_channel))
    return (y, None, None)


def _rest(shape: Sequence[int], groups: int) -> int:
    total = 1
    for d in shape[1:]:
        total *= d
    return total // groups


def _dropout(ctx: AtenContext) -> Value:
    if ctx.arg("train", False):
        raise ctx.unsupported("dropout in training mode")
    return ctx.tensor("input")


OPS: dict[str, Lowering] = {
    "aten.mm.default": _matmul("self", "mat2"),
    "aten.bmm.default": _matmul("self", "mat2"),
    "aten.matmul.default": _matmul("self", "other"),
    "aten.addmm.default": _addmm,
    "aten.baddbmm.default": _addmm,
    "aten.linear.default": _linear,
    "aten.convolution.default": _convolution,
    "aten.max_pool1d_with_indices.default": _max_pool(1),
    "aten.max_pool2d_with_indices.default": _max_pool(2),
    "aten.max_pool3d_with_indices.default": _max_pool(3),
    "aten.max_pool1d.default": _max_pool(1, indices=False),
    "aten.max_pool2d.default": _max_pool(2, indices=False),
    "aten.max_pool3d.default": _max_pool(3, indices=False),
    "aten.avg_pool1d.default": _avg_pool(1),
    "aten.avg_pool2d.default": _avg_pool(2),
    "aten.avg_pool3d.default": _avg_pool(3),
    "aten._adaptive_avg_pool1d.default": _adaptive_avg_pool(1),
    "aten._adaptive_avg_pool2d.default": _adaptive_avg_pool(2),
    "aten._adaptive_avg_pool3d.default": _adaptive_avg_pool(3),
    "aten.adaptive_avg_pool1d.default": _adaptive_avg_pool(1),
    "aten._softmax.default": _softmax(log=False),
    "aten._log_softmax.default": _softmax(log=True),
    "aten.softmax.int": _softmax(log=False),
    "aten.log_softmax.int": _softmax(log=True),
    "aten.native_layer_norm.default": _layer_norm,
    "aten._native_batch_norm_legit_no_training.default": _batch_norm_no_training,
    "aten.native_group_norm.default": _group_norm,
    "aten.dropout.default": _dropout,
}
