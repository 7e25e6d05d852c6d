"""ONNX Runtime's quantized operators (domain com.microsoft), as `quantize_static` writes
them in QOperator format: QGemm, QLinearAdd, QLinearMul, QLinearGlobalAveragePool,
QLinearSoftmax, QLinearConcat, QLinearLeakyRelu, QLinearSigmoid.

Each follows ONNX Runtime's kernel: integer inputs centred on their zero points, the
arithmetic in f32 with the scale ratios ORT precomputes (`a_scale / c_scale`, ...), then
round half to even, add the output zero point and saturate.  Where ORT computes through a
256-entry lookup table (softmax, sigmoid, leaky relu) the result is the same function of
the input byte, computed in f32; it may differ from ORT's by one quantization step, the
tolerance `references.parity` allows on outputs computed through quantization."""

from __future__ import annotations

import math

from luminal.compiler.frontend.compose import contraction, norm, shape
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.frontend.onnx_ops.quant import centred, requantize
from luminal.compiler.ir import DType, GraphBuilder, Value

MS = "com.microsoft"


def _scalar(b: GraphBuilder, v: Value) -> Value:
    """A per-tensor scale as an f32 scalar."""
    return b.cast(b.reshape(v, ()), DType.F32)


def _dequant(b: GraphBuilder, x: Value, scale: Value, zero: Value | None) -> Value:
    return m.mul(b, b.cast(centred(b, x, zero), DType.F32), _scalar(b, scale))


def _out_type(zero: Value | None, like: Value) -> DType:
    return zero.dtype if zero is not None else like.dtype


def _binary(mul: bool) -> Lowering:
    """QLinearAdd: c_zp + ((a - a_zp) a_s + (b - b_zp) b_s) / c_s, in that order in f32,
    as ONNX Runtime's kernels round it (its portable loop and its AVX2 kernel; a scale
    ratio per input instead rounds differently: 1 in 200,000 outputs of a ResNet-18
    residual add one step off); QLinearMul: c_zp + (a - a_zp)(b - b_zp) a_s b_s / c_s."""

    def lower(ctx: NodeContext) -> list[Value]:
        b = ctx.b
        a, a_s, a_z, x, x_s, x_z, c_s, c_z = (ctx.optional(i) for i in range(8))
        assert a is not None and x is not None and a_s is not None and x_s is not None
        assert c_s is not None
        ai = b.cast(centred(b, a, a_z), DType.F32)
        xi = b.cast(centred(b, x, x_z), DType.F32)
        cs = _scalar(b, c_s)
        if mul:
            ratio = m.div(b, m.mul(b, _scalar(b, a_s), _scalar(b, x_s)), cs)
            y = m.mul(b, m.mul(b, ai, xi), ratio)
        else:
            total = m.add(b, m.mul(b, ai, _scalar(b, a_s)), m.mul(b, xi, _scalar(b, x_s)))
            y = m.div(b, total, cs)
        return [requantize(b, y, c_z, _out_type(c_z, a))]

    return lower


def _qgemm(ctx: NodeContext) -> list[Value]:
    """(A - a_zp)(B - b_zp) + C in the i32 domain (C is a bias quantized with scale
    alpha a_s b_s), then scaled by alpha a_s b_s: a float output, or requantized when
    y_scale is given.  b_scale may be per output column."""
    b = ctx.b
    a, a_s, a_z, w, w_s, w_z, c, y_s, y_z = (ctx.optional(i) for i in range(9))
    assert a is not None and w is not None and a_s is not None and w_s is not None
    alpha = float(ctx.attr("alpha", 1.0))
    ta, tb = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    ai = centred(b, a, a_z)
    if ta:
        ai = b.permute(ai, (1, 0))
    wi = b.cast(w, DType.I32)
    if tb:
        wi = b.permute(wi, (1, 0))
    if w_z is not None:
        z = b.cast(w_z, DType.I32)
        z = b.reshape(z, (1, z.shape[0])) if z.ndim == 1 and z.shape[0] > 1 else b.reshape(z, ())
        wi = m.sub(b, wi, z)
    acc = contraction.matmul(b, ai, wi)
    if c is not None:  # quantized with scale alpha a_s b_s: added in the i32 domain
        acc = m.add(b, acc, b.cast(c, DType.I32))
    acc = b.cast(acc, DType.F32)
    ws = b.cast(w_s, DType.F32)
    ws = b.reshape(ws, (1, ws.shape[0])) if ws.ndim == 1 and ws.shape[0] > 1 else b.reshape(ws, ())
    scale = m.mul(b, _scalar(b, a_s), ws)
    if alpha != 1.0:
        scale = m.mul(b, scale, m.like(b, alpha, scale))
    if y_s is None:
        return [m.mul(b, acc, scale)]
    y = m.mul(b, acc, m.div(b, scale, _scalar(b, y_s)))
    return [requantize(b, y, y_z, _out_type(y_z, a))]


def _global_average_pool(ctx: NodeContext) -> list[Value]:
    """The integer sum of (x - x_zp) over the spatial axes times x_s / (y_s N)."""
    b = ctx.b
    x, x_s, x_z, y_s, y_z = (ctx.optional(i) for i in range(5))
    assert x is not None and x_s is not None and y_s is not None
    last = bool(ctx.attr("channels_last", 0))
    axes = list(range(1, x.ndim - 1)) if last else list(range(2, x.ndim))
    count = math.prod(x.shape[a] for a in axes)
    total = b.cast(m.reduce_sum(b, centred(b, x, x_z), axes), DType.F32)
    ratio = m.div(b, _scalar(b, x_s), m.mul(b, _scalar(b, y_s), m.like(b, float(count), total)))
    return [requantize(b, m.mul(b, total, ratio), y_z, _out_type(y_z, x))]


def _unary(fn: str) -> Lowering:
    """y = quantize(f(dequantize(x))) for f in softmax, sigmoid, leaky relu."""

    def lower(ctx: NodeContext) -> list[Value]:
        b = ctx.b
        x, x_s, x_z, y_s, y_z = (ctx.optional(i) for i in range(5))
        assert x is not None and x_s is not None and y_s is not None
        d = _dequant(b, x, x_s, x_z)
        if fn == "softmax":
            if int(ctx.attr("opset", 13)) >= 13:
                f = norm.softmax(b, d, int(ctx.attr("axis", -1)) % d.ndim)
            else:
                axis = int(ctx.attr("axis", 1)) % max(d.ndim, 1)
                f = b.reshape(norm.softmax(b, shape.flatten(b, d, axis), 1), d.shape)
        elif fn == "sigmoid":
            f = m.sigmoid(b, d)
        else:
            f = m.leaky_relu(b, d, float(ctx.attr("alpha", 0.01)))
        y = m.div(b, f, _scalar(b, y_s))
        return [requantize(b, y, y_z, _out_type(y_z, x))]

    return lower


def _concat(ctx: NodeContext) -> list[Value]:
    """QLinearConcat(y_scale, y_zp, (x, x_scale, x_zp)...): each input requantized to the
    output's scale, then concatenated."""
    b = ctx.b
    y_s, y_z = ctx.input(0), ctx.optional(1)
    rest = [ctx.optional(i) for i in range(2, len(ctx.inputs))]
    if len(rest) % 3:
        raise ctx.error(f"{len(rest)} inputs after y_scale, y_zero_point are not triples")
    axis = int(ctx.attr("axis", 0))
    parts = []
    for k in range(0, len(rest), 3):
        x, x_s, x_z = rest[k : k + 3]
        assert x is not None and x_s is not None
        y = m.div(b, _dequant(b, x, x_s, x_z), _scalar(b, y_s))
        parts.append(requantize(b, y, y_z, _out_type(y_z, x)))
    return [shape.concat(b, parts, axis % parts[0].ndim)]


DOMAIN_OPS: dict[tuple[str, str], Lowering] = {
    (MS, "QGemm"): _qgemm,
    (MS, "QLinearAdd"): _binary(mul=False),
    (MS, "QLinearMul"): _binary(mul=True),
    (MS, "QLinearGlobalAveragePool"): _global_average_pool,
    (MS, "QLinearSoftmax"): _unary("softmax"),
    (MS, "QLinearSigmoid"): _unary("sigmoid"),
    (MS, "QLinearLeakyRelu"): _unary("leaky_relu"),
    (MS, "QLinearConcat"): _concat,
}
