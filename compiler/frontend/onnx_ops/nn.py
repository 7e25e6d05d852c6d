"""ONNX neural-network ops: contractions, convolution, pooling, softmax, normalisation."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from luminal.compiler.frontend.compose import contraction, norm, shape, windows
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, Op, Value


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
    equation = str(ctx.attr("equation")).replace(" ", "")
    operands = [ctx.input(i) for i in range(len(ctx.inputs))]
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands) or not any(
        len(set(t.replace("...", ""))) != len(t.replace("...", "")) for t in terms
    ):
        return [contraction.einsum(ctx.b, equation, operands)]
    # Repeated indices (diagonals): spell the ellipsis out, then take each diagonal first.
    ell = max(
        (
            op.ndim - len(t.replace("...", ""))
            for t, op in zip(terms, operands, strict=True)
            if "..." in t
        ),
        default=0,
    )
    letters = "".join(chr(0x391 + k) for k in range(ell))
    spelled = [
        t.replace("...", letters[ell - (op.ndim - len(t.replace("...", ""))) :])
        if "..." in t
        else t
        for t, op in zip(terms, operands, strict=True)
    ]
    if arrow:
        out = rhs.replace("...", letters)
    else:
        flat = "".join(t.replace("...", "") for t in terms)
        out = letters + "".join(sorted(c for c in set(flat) if flat.count(c) == 1))
    new_terms, new_ops = [], []
    for term, op in zip(spelled, operands, strict=True):
        while len(set(term)) != len(term):
            term, op = _diagonal(ctx, term, op)
        new_terms.append(term)
        new_ops.append(op)
    return [contraction.einsum(ctx.b, ",".join(new_terms) + "->" + out, new_ops)]


def _diagonal(ctx: NodeContext, term: str, x: Value) -> tuple[str, Value]:
    """Take the diagonal of the first repeated index of `term`."""
    b = ctx.b
    c = next(ch for ch in term if term.count(ch) > 1)
    i = term.index(c)
    j = term.index(c, i + 1)
    if x.shape[i] != x.shape[j]:
        raise ctx.error(f"index '{c}' has sizes {x.shape[i]} and {x.shape[j]}")
    perm = [k for k in range(x.ndim) if k != j]
    perm.insert(i + 1, j)
    x = b.permute(x, perm)
    n = x.shape[i]
    merged = b.reshape(x, (*x.shape[:i], n * n, *x.shape[i + 2 :]))
    diag = b.gather(merged, b.const(np.arange(n, dtype=np.int64) * (n + 1)), i)
    return term[:j] + term[j + 1 :], diag


def spatial_attrs(
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
    strides, dilations, pads = spatial_attrs(ctx, x.shape[2:], kernel)
    groups = int(ctx.attr("group", 1))
    return [contraction.conv(ctx.b, x, w, ctx.optional(2), strides, pads, dilations, groups)]


def _conv_transpose(ctx: NodeContext) -> list[Value]:
    x, w = ctx.input(0), ctx.input(1)
    nd = x.ndim - 2
    kernel = list(ctx.attr("kernel_shape", w.shape[2:]))
    if tuple(kernel) != w.shape[2:]:
        raise ctx.error(f"kernel_shape {kernel} does not match weight shape {w.shape}")
    strides = list(ctx.attr("strides", [1] * nd))
    dilations = list(ctx.attr("dilations", [1] * nd))
    out_pad = list(ctx.attr("output_padding", [0] * nd))
    groups = int(ctx.attr("group", 1))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    raw = ctx.attr("pads")
    out_shape = ctx.attr("output_shape")
    natural = [
        s * (i - 1) + p + (k - 1) * d + 1
        for i, s, p, k, d in zip(x.shape[2:], strides, out_pad, kernel, dilations, strict=True)
    ]
    if raw is not None and auto_pad in ("NOTSET", ""):
        pads = [(int(raw[k]), int(raw[k + nd])) for k in range(nd)]
    elif auto_pad in ("NOTSET", "", "SAME_UPPER", "SAME_LOWER", "VALID"):
        if out_shape is not None:
            target = [int(v) for v in out_shape][-nd:]
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            target = [i * s for i, s in zip(x.shape[2:], strides, strict=True)]
        else:
            target = natural
        total = [n - t for n, t in zip(natural, target, strict=True)]
        if auto_pad == "SAME_UPPER":
            pads = [(t // 2, t - t // 2) for t in total]
        else:
            pads = [(t - t // 2, t // 2) for t in total]
    else:
        raise ctx.unsupported(f"auto_pad='{auto_pad}'")
    y = contraction.conv_transpose(
        ctx.b, x, w, ctx.optional(2), strides, pads, dilations, out_pad, groups
    )
    return [y]


def _pool_common(
    ctx: NodeContext, x: Value
) -> tuple[list[int], list[int], list[int], list[tuple[int, int]], list[tuple[int, int]]]:
    kernel = list(ctx.attr("kernel_shape"))
    strides, dilations, pads = spatial_attrs(ctx, x.shape[2:], kernel)
    real = list(pads)
    if int(ctx.attr("ceil_mode", 0)):
        pads = windows.ceil_pads(x.shape[2:], kernel, strides, dilations, pads)
    return kernel, strides, dilations, pads, real


def _max_pool(ctx: NodeContext) -> list[Value]:
    column_major = int(ctx.attr("storage_order", 0)) == 1
    x = ctx.input(0)
    kernel, strides, dilations, pads, _ = _pool_common(ctx, x)
    y = windows.max_pool(ctx.b, x, kernel, strides, pads, dilations)
    if len(ctx.node.output) < 2 or not ctx.node.output[1]:
        return [y]
    return [y, _max_pool_indices(ctx, x, kernel, strides, pads, dilations, column_major)]


def _max_pool_indices(ctx, x, kernel, strides, pads, dilations, column_major):  # type: ignore[no-untyped-def]
    """The flat input position of each window's maximum (the first one, in window order).
    Column-major flattening (storage_order=1) orders the spatial axes last-fastest."""
    b = ctx.b
    nd = len(kernel)
    n, c, *sp = x.shape
    if column_major:
        spatial = np.arange(int(np.prod(sp)), dtype=np.int64).reshape(sp[::-1]).transpose()
    else:
        spatial = np.arange(int(np.prod(sp)), dtype=np.int64).reshape(sp)
    plane = int(np.prod(sp))
    flat = (np.arange(n * c, dtype=np.int64) * plane).reshape(n, c, *([1] * nd)) + spatial
    fill = -np.inf if x.dtype.is_float else int(np.iinfo(x.dtype.np).min)
    win = windows.windows(b, x, kernel, strides, dilations, pads, fill)
    idx = windows.windows(b, b.const(flat), kernel, strides, dilations, pads, -1)
    axes = list(range(win.ndim - nd, win.ndim))
    best = b.expand(m.reduce_max(b, win, axes, keepdims=True), win.shape)
    hit = b.binary(Op.CMPEQ, win, best)
    big = m.like(b, np.iinfo(np.int64).max, idx)
    return m.reduce_min(b, b.where(hit, idx, big), axes, keepdims=False)


def _lp_pool(ctx: NodeContext) -> list[Value]:
    """(sum over the window of |x|^p)^(1/p); pads add nothing."""
    b, x = ctx.b, ctx.input(0)
    p = int(ctx.attr("p", 2))
    kernel, strides, dilations, pads, _ = _pool_common(ctx, x)
    ctx.attr("count_include_pad")  # zeros in the sum either way
    powered = m.pow_(b, m.abs_(b, x), m.like(b, p, x), float(p))
    win = windows.windows(b, powered, kernel, strides, dilations, pads, 0.0)
    total = m.reduce_sum(b, win, list(range(win.ndim - len(kernel), win.ndim)), keepdims=False)
    return [m.pow_(b, total, m.like(b, 1.0 / p, total), 1.0 / p)]


def _global_lp_pool(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    p = int(ctx.attr("p", 2))
    powered = m.pow_(b, m.abs_(b, x), m.like(b, p, x), float(p))
    total = m.reduce_sum(b, powered, list(range(2, x.ndim)), keepdims=True)
    return [m.pow_(b, total, m.like(b, 1.0 / p, total), 1.0 / p)]


def _avg_pool(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    kernel, strides, dilations, pads, real = _pool_common(ctx, x)
    include = bool(ctx.attr("count_include_pad", 0))
    return [windows.avg_pool(ctx.b, x, kernel, strides, pads, dilations, include, real)]


def _softmax_like(log: bool) -> Lowering:
    def lower(ctx: NodeContext) -> list[Value]:
        x = ctx.input(0)
        fn = norm.log_softmax if log else norm.softmax
        if ctx.narrow is not None and not log:
            fn = _rounding_softmax(ctx)
        if ctx.opset >= 13:
            return [fn(ctx.b, x, int(ctx.attr("axis", -1)) % x.ndim)]
        # Before opset 13 the input is coerced to 2-D at `axis` and normalised per row.
        axis = int(ctx.attr("axis", 1)) % max(x.ndim, 1)
        flat = shape.flatten(ctx.b, x, axis)
        return [ctx.b.reshape(fn(ctx.b, flat, 1), x.shape)]

    return lower


def _rounding_softmax(ctx: NodeContext):  # type: ignore[no-untyped-def]
    """Softmax of f16/bf16 inputs rounded where the reference rounds: after the shift,
    the exp, the sum and the division."""
    r = ctx.round

    def softmax(b, x: Value, axis: int) -> Value:  # type: ignore[no-untyped-def]
        shifted = r(m.sub(b, x, m.reduce_max(b, x, [axis])))
        e = r(m.exp(b, shifted))
        return r(m.div(b, e, r(m.reduce_sum(b, e, [axis]))))

    return softmax


def _batch_norm(ctx: NodeContext) -> list[Value]:
    if not int(ctx.attr("spatial", 1)):
        raise ctx.unsupported("spatial=0")
    momentum = float(ctx.attr("momentum", 0.9))
    eps = float(ctx.attr("epsilon", 1e-5))
    x, scale, bias, mean, var = (ctx.input(i) for i in range(5))
    if not int(ctx.attr("training_mode", 0)):
        if any(name for name in ctx.node.output[1:]):
            raise ctx.unsupported("running mean/var outputs outside training mode")
        return [norm.batch_norm(ctx.b, x, scale, bias, mean, var, eps)]
    # training: normalise with the batch's statistics; update the running ones
    b = ctx.b
    axes = [0, *range(2, x.ndim)]
    batch_mean = m.reduce_mean(b, x, axes, keepdims=False)
    centred = m.sub(b, x, b.reshape(batch_mean, (1, x.shape[1], *([1] * (x.ndim - 2)))))
    batch_var = m.reduce_mean(b, b.binary(Op.MUL, centred, centred), axes, keepdims=False)
    y = norm.batch_norm(b, x, scale, bias, batch_mean, batch_var, eps)

    def running(old: Value, new: Value) -> Value:
        kept = m.mul(b, old, m.like(b, momentum, old))
        return m.add(b, kept, m.mul(b, new, m.like(b, 1 - momentum, new)))

    return [y, running(mean, batch_mean), running(var, batch_var)]


def _dropout(ctx: NodeContext) -> list[Value | None]:
    ctx.attr("seed")
    ratio = ctx.attr("ratio", 0.5) if ctx.opset < 12 else None
    training = ctx.const(2, "training_mode")
    if training is not None and bool(training.reshape(-1)[0]):
        given = ctx.const(1, "ratio")
        ratio = 0.5 if given is None else float(np.asarray(given).reshape(-1)[0])
        if ratio != 0:
            raise ctx.unsupported("training_mode=True with a non-zero ratio (random masks)")
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
    "ConvTranspose": _conv_transpose,
    "MaxPool": _max_pool,
    "AveragePool": _avg_pool,
    "LpPool": _lp_pool,
    "GlobalLpPool": _global_lp_pool,
    "GlobalAveragePool": lambda ctx: [windows.global_avg_pool(ctx.b, ctx.input(0))],
    "GlobalMaxPool": lambda ctx: [windows.global_max_pool(ctx.b, ctx.input(0))],
    "Softmax": _softmax_like(log=False),
    "LogSoftmax": _softmax_like(log=True),
    "BatchNormalization": _batch_norm,
    "Dropout": _dropout,
}
