"""ONNX neural-network ops: contractions, convolution, pooling, softmax, normalisation."""

from __future__ import annotations

import math
from collections.abc import Sequence

from luminal.compiler.frontend.compose import contraction, norm, shape, windows
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, Value


def _matmul(ctx: NodeContext) -> list[Value]:
    return [contraction.matmul(ctx.b, ctx.input(0), ctx.input(1))]


def _gemm(ctx: NodeContext) -> list[Value]:
    return [
        contraction.gemm(
            ctx.b,
            ctx.input(0),
            ctx.input(1),
            ctx.optional(2),
            alpha=float(ctx.attr("alpha", 1.0)),
            beta=float(ctx.attr("beta", 1.0)),
            trans_a=bool(ctx.attr("transA", 0)),
            trans_b=bool(ctx.attr("transB", 0)),
        )
    ]


def _einsum(ctx: NodeContext) -> list[Value]:
    return [
        contraction.einsum(
            ctx.b, ctx.attr("equation"), [ctx.input(i) for i in range(len(ctx.inputs))]
        )
    ]


def _spatial_attrs(
    ctx: NodeContext, spatial: Sequence[int], kernel: Sequence[int]
) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """strides, dilations and (begin, end) pads per spatial axis, auto_pad resolved."""
    nd = len(kernel)
    strides = list(ctx.attr("strides", [1] * nd))
    dilations = list(ctx.attr("dilations", [1] * nd))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    raw = list(ctx.attr("pads", [0] * (2 * nd)))
    if auto_pad in ("NOTSET", ""):
        pads = [(raw[k], raw[k + nd]) for k in range(nd)]
    elif auto_pad == "VALID":
        pads = [(0, 0)] * nd
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for i, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            total = max((math.ceil(i / s) - 1) * s + (k - 1) * d + 1 - i, 0)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
    else:
        raise ctx.unsupported(f"auto_pad='{auto_pad}'")
    if len(strides) != nd or len(dilations) != nd:
        raise ctx.error(f"strides/dilations must have {nd} entries")
    return strides, dilations, pads


def _conv(ctx: NodeContext) -> list[Value]:
    x, w = ctx.input(0), ctx.input(1)
    kernel = list(ctx.attr("kernel_shape", w.shape[2:]))
    if tuple(kernel) != w.shape[2:]:
        raise ctx.error(f"kernel_shape {kernel} does not match weight shape {w.shape}")
    strides, dilations, pads = _spatial_attrs(ctx, x.shape[2:], kernel)
    groups = int(ctx.attr("group", 1))
    return [contraction.conv(ctx.b, x, w, ctx.optional(2), strides, pads, dilations, groups)]


def _pool_common(
    ctx: NodeContext, x: Value
) -> tuple[list[int], list[int], list[int], list[tuple[int, int]], list[tuple[int, int]]]:
    kernel = list(ctx.attr("kernel_shape"))
    strides, dilations, pads = _spatial_attrs(ctx, x.shape[2:], kernel)
    real = list(pads)
    if int(ctx.attr("ceil_mode", 0)):
        pads = windows.ceil_pads(x.shape[2:], kernel, strides, dilations, pads)
    return kernel, strides, dilations, pads, real


def _max_pool(ctx: NodeContext) -> list[Value]:
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.unsupported("the Indices output is not supported")
    if int(ctx.attr("storage_order", 0)) != 0:
        raise ctx.unsupported("storage_order=1")
    x = ctx.input(0)
    kernel, strides, dilations, pads, _ = _pool_common(ctx, x)
    return [windows.max_pool(ctx.b, x, kernel, strides, pads, dilations)]


def _avg_pool(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    kernel, strides, dilations, pads, real = _pool_common(ctx, x)
    include = bool(ctx.attr("count_include_pad", 0))
    return [windows.avg_pool(ctx.b, x, kernel, strides, pads, dilations, include, real)]


def _softmax_like(log: bool) -> Lowering:
    def lower(ctx: NodeContext) -> list[Value]:
        x = ctx.input(0)
        fn = norm.log_softmax if log else norm.softmax
        if ctx.opset >= 13:
            return [fn(ctx.b, x, int(ctx.attr("axis", -1)) % x.ndim)]
        # Before opset 13 the input is coerced to 2-D at `axis` and normalised per row.
        axis = int(ctx.attr("axis", 1)) % max(x.ndim, 1)
        flat = shape.flatten(ctx.b, x, axis)
        return [ctx.b.reshape(fn(ctx.b, flat, 1), x.shape)]

    return lower


def _layer_norm(ctx: NodeContext) -> list[Value]:
    if any(name for name in ctx.node.output[1:]):
        raise ctx.unsupported("the Mean and InvStdDev outputs are not supported")
    x = ctx.input(0)
    axis = int(ctx.attr("axis", -1)) % x.ndim
    ctx.attr("stash_type")  # we normalise in the input precision (f32 models are exact)
    eps = float(ctx.attr("epsilon", 1e-5))
    return [
        norm.layer_norm(ctx.b, x, ctx.input(1), ctx.optional(2), list(range(axis, x.ndim)), eps)
    ]


def _batch_norm(ctx: NodeContext) -> list[Value]:
    if int(ctx.attr("training_mode", 0)):
        raise ctx.unsupported("training_mode=1")
    if any(name for name in ctx.node.output[1:]):
        raise ctx.unsupported("training outputs (running mean/var) are not supported")
    if not int(ctx.attr("spatial", 1)):
        raise ctx.unsupported("spatial=0")
    ctx.attr("momentum")  # only used in training
    eps = float(ctx.attr("epsilon", 1e-5))
    x, scale, bias, mean, var = (ctx.input(i) for i in range(5))
    return [norm.batch_norm(ctx.b, x, scale, bias, mean, var, eps)]


def _dropout(ctx: NodeContext) -> list[Value | None]:
    ctx.attr("seed")
    ctx.attr("ratio")
    training = ctx.const(2, "training_mode")
    if training is not None and bool(training.reshape(-1)[0]):
        raise ctx.unsupported("training_mode=True")
    x = ctx.input(0)
    outs: list[Value | None] = [x]
    if len(ctx.node.output) > 1:
        outs.append(m.full(ctx.b, True, x.shape, DType.BOOL) if ctx.node.output[1] else None)
    return outs


OPS: dict[str, Lowering] = {
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Einsum": _einsum,
    "Conv": _conv,
    "MaxPool": _max_pool,
    "AveragePool": _avg_pool,
    "GlobalAveragePool": lambda ctx: [windows.global_avg_pool(ctx.b, ctx.input(0))],
    "GlobalMaxPool": lambda ctx: [windows.global_max_pool(ctx.b, ctx.input(0))],
    "Softmax": _softmax_like(log=False),
    "LogSoftmax": _softmax_like(log=True),
    "LayerNormalization": _layer_norm,
    "BatchNormalization": _batch_norm,
    "Dropout": _dropout,
}
