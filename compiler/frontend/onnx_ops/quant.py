"""ONNX linear quantization over integer types (8 and 16 bit): QuantizeLinear,
DequantizeLinear (per tensor, per axis, blocked), DynamicQuantizeLinear, MatMulInteger,
ConvInteger, QLinearMatMul and QLinearConv.  Float8, float4 and 4/2-bit integer encodings
are not element types luminal has; they are refused by name."""

from __future__ import annotations

import numpy as np

from luminal.compiler.frontend.compose import contraction
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import special as sp
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.frontend.onnx_ops.nn import spatial_attrs
from luminal.compiler.ir import DType, GraphBuilder, Value

QUANT_TYPES = (DType.U8, DType.I8, DType.U16, DType.I16)


def _spread(ctx: NodeContext, v: Value, shape: tuple[int, ...], axis: int, block: int) -> Value:
    """A scale or zero point made broadcastable to `shape` (per tensor, axis or block)."""
    b = ctx.b
    if v.ndim == 0 or int(np.prod(v.shape)) == 1:
        return b.reshape(v, ())
    if not block:
        if v.ndim != 1 or v.shape[0] != shape[axis]:
            raise ctx.error(
                f"a per-axis scale of shape {v.shape} does not fit axis {axis} of {shape}"
            )
        return b.reshape(v, tuple(v.shape[0] if k == axis else 1 for k in range(len(shape))))
    if v.ndim != len(shape):
        raise ctx.error("a blocked scale must have the input's rank")
    rep = (*v.shape[: axis + 1], block, *v.shape[axis + 1 :])
    grown = b.expand(b.reshape(v, (*v.shape[: axis + 1], 1, *v.shape[axis + 1 :])), rep)
    grown = b.reshape(grown, (*v.shape[:axis], v.shape[axis] * block, *v.shape[axis + 1 :]))
    spec = [(0, 1, d) for d in grown.shape]
    spec[axis] = (0, 1, shape[axis])
    out = b.slice(grown, spec)
    if out.shape != tuple(shape):
        raise ctx.error(f"blocked scale {v.shape} does not fit {shape} with block {block}")
    return out


def _axis(ctx: NodeContext, rank: int) -> int:
    axis = int(ctx.attr("axis", 1))
    return axis % rank if rank else 0


def requantize(b: GraphBuilder, y: Value, zero: Value | None, dtype: DType) -> Value:
    """round half to even, add the zero point, saturate, convert."""
    r = sp.round_half_even(b, y)
    if zero is not None:
        if zero.ndim and int(np.prod(zero.shape)) == 1:
            zero = b.reshape(zero, ())
        r = m.add(b, r, b.cast(zero, r.dtype))
    info = np.iinfo(dtype.np)
    r = m.clip(b, r, m.like(b, int(info.min), r), m.like(b, int(info.max), r))
    return b.cast(r, dtype)


def _quantize(ctx: NodeContext) -> list[Value]:
    b, x, scale = ctx.b, ctx.input(0), ctx.input(1)
    zero = ctx.optional(2)
    block = int(ctx.attr("block_size", 0))
    ctx.attr("saturate")  # only float8 outputs saturate differently
    want = ctx.attr("output_dtype")
    precision = ctx.attr("precision")
    dtype = zero.dtype if zero is not None else (ctx.dtype(want) if want else DType.U8)
    if want and zero is not None and ctx.dtype(want) is not zero.dtype:
        raise ctx.error("output_dtype differs from the zero point's type")
    if dtype not in QUANT_TYPES:
        raise ctx.unsupported(f"quantizing to {dtype.value} (8 and 16 bit integers only)")
    axis = _axis(ctx, x.ndim)
    s = _spread(ctx, scale, x.shape, axis, block)
    if precision is not None and ctx.dtype(precision) is DType.F64:
        y = m.div(b, b.cast(x, DType.F64), b.cast(s, DType.F64))
    else:
        y = ctx.round(m.div(b, x, s))
    z = None if zero is None else _spread(ctx, zero, x.shape, axis, block)
    return [requantize(b, y, z, dtype)]


def _dequantize(ctx: NodeContext) -> list[Value]:
    b, x, scale = ctx.b, ctx.input(0), ctx.input(1)
    zero = ctx.optional(2)
    if x.dtype not in (*QUANT_TYPES, DType.I32):
        raise ctx.unsupported(f"dequantizing {x.dtype.value}")
    block = int(ctx.attr("block_size", 0))
    want = ctx.attr("output_dtype")
    axis = _axis(ctx, x.ndim)
    ft = DType.F64 if scale.dtype is DType.F64 else DType.F32
    dx = b.cast(x, ft)
    if zero is not None:
        if zero.dtype is not x.dtype:
            raise ctx.error("the zero point's type differs from the input's")
        dx = m.sub(b, dx, b.cast(_spread(ctx, zero, x.shape, axis, block), ft))
    y = m.mul(b, dx, b.cast(_spread(ctx, scale, x.shape, axis, block), ft))
    return [b.cast(y, ctx.dtype(want)) if want else y]


def centred(b: GraphBuilder, x: Value, zero: Value | None, per_row: bool = False) -> Value:
    """x - zero in i32 (a per-tensor zero point, or per row of a matrix with `per_row`)."""
    xi = b.cast(x, DType.I32)
    if zero is None:
        return xi
    z = b.cast(zero, DType.I32)
    if per_row and z.ndim == 1 and z.shape[0] > 1:
        z = b.reshape(z, (z.shape[0], 1))
    elif z.ndim and int(np.prod(z.shape)) == 1:
        z = b.reshape(z, ())
    return m.sub(b, xi, z)


def _dynamic_quantize(ctx: NodeContext) -> list[Value]:
    """DynamicQuantizeLinear: u8 over the range of x widened to hold 0; scale
    (max(0, max x) - min(0, min x)) / 255, zero point round(-min / scale) saturated."""
    b, x = ctx.b, ctx.input(0)
    axes = list(range(x.ndim))
    zero = m.like(b, 0.0, b.reshape(m.reduce_max(b, x, axes, keepdims=False), ()))
    hi = m.maximum(b, b.reshape(m.reduce_max(b, x, axes, keepdims=False), ()), zero)
    lo = m.minimum(b, b.reshape(m.reduce_min(b, x, axes, keepdims=False), ()), zero)
    scale = m.div(b, m.sub(b, hi, lo), m.like(b, 255.0, hi))
    zp = requantize(b, m.div(b, m.neg(b, lo), scale), None, DType.U8)
    return [requantize(b, m.div(b, x, scale), zp, DType.U8), scale, zp]


def _matmul_integer(ctx: NodeContext) -> list[Value]:
    b = ctx.b
    a = centred(b, ctx.input(0), ctx.optional(2), per_row=True)
    w = centred(b, ctx.input(1), ctx.optional(3))
    return [contraction.matmul(b, a, w)]


def _conv_weights(b: GraphBuilder, w: Value, zero: Value | None) -> Value:
    wi = b.cast(w, DType.I32)
    if zero is None:
        return wi
    z = b.cast(zero, DType.I32)
    if z.ndim == 1 and z.shape[0] == w.shape[0] and z.shape[0] > 1:
        z = b.reshape(z, (z.shape[0], *([1] * (w.ndim - 1))))
    return m.sub(b, wi, z)


def _int_conv(ctx: NodeContext, x: Value, w: Value, bias: Value | None) -> Value:
    kernel = list(ctx.attr("kernel_shape", w.shape[2:]))
    strides, dilations, pads = spatial_attrs(ctx, x.shape[2:], kernel)
    groups = int(ctx.attr("group", 1))
    return contraction.conv(ctx.b, x, w, bias, strides, pads, dilations, groups)


def _conv_integer(ctx: NodeContext) -> list[Value]:
    b = ctx.b
    x = centred(b, ctx.input(0), ctx.optional(2))
    return [_int_conv(ctx, x, _conv_weights(b, ctx.input(1), ctx.optional(3)), None)]


def _factor(ctx: NodeContext, a_scale: Value, b_scale: Value, y_scale: Value) -> Value:
    """a_scale * b_scale / y_scale in the scales' type, as ONNX Runtime's kernels compute
    the requantization multiplier (f32 scales: f32, then float(acc) x multiplier in f32)."""
    b, r = ctx.b, ctx.round
    f = r(m.div(b, r(m.mul(b, a_scale, b_scale)), y_scale))
    return b.cast(f, DType.F64 if f.dtype is DType.F64 else DType.F32)


def _qlinear_matmul(ctx: NodeContext) -> list[Value]:
    b = ctx.b
    a, a_s, a_z, w, w_s, w_z, y_s, y_z = (ctx.optional(i) for i in range(8))
    assert (
        a is not None and w is not None and a_s is not None and w_s is not None and y_s is not None
    )
    c = contraction.matmul(b, centred(b, a, a_z), centred(b, w, w_z))
    f = _factor(ctx, a_s, w_s, y_s)
    d = m.mul(b, b.cast(c, f.dtype), f)
    dtype = y_z.dtype if y_z is not None else a.dtype
    return [requantize(b, d, y_z, dtype)]


def _qlinear_conv(ctx: NodeContext) -> list[Value]:
    b = ctx.b
    x, x_s, x_z, w, w_s, w_z, y_s, y_z = (ctx.optional(i) for i in range(8))
    bias = ctx.optional(8)
    assert (
        x is not None and w is not None and x_s is not None and w_s is not None and y_s is not None
    )
    acc = _int_conv(ctx, centred(b, x, x_z), _conv_weights(b, w, w_z), bias)
    if w_s.ndim == 1 and w_s.shape[0] > 1:
        w_s = b.reshape(w_s, (1, w_s.shape[0], *([1] * (acc.ndim - 2))))
    f = _factor(ctx, x_s, w_s, y_s)
    d = m.mul(b, b.cast(acc, f.dtype), f)
    dtype = y_z.dtype if y_z is not None else x.dtype
    return [requantize(b, d, y_z, dtype)]


OPS: dict[str, Lowering] = {
    "QuantizeLinear": _quantize,
    "DequantizeLinear": _dequantize,
    "DynamicQuantizeLinear": _dynamic_quantize,
    "MatMulInteger": _matmul_integer,
    "ConvInteger": _conv_integer,
    "QLinearMatMul": _qlinear_matmul,
    "QLinearConv": _qlinear_conv,
}
