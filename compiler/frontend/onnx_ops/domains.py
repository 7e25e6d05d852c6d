"""The few ops of other ONNX domains luminal lowers: the optimizers of
ai.onnx.preview.training (Adagrad, Adam, Momentum: one update step, element-wise; the step
count T is a constant, specialized by the ONNX backend when fed) and ai.onnx.ml's Binarizer
and ArrayFeatureExtractor."""

from __future__ import annotations

import math

import numpy as np

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, GraphBuilder, Op, Value

# ---- ai.onnx.preview.training ------------------------------------------------------------


def _step(ctx: NodeContext) -> int:
    t = ctx.const(1, "T")
    assert t is not None
    return int(np.asarray(t).reshape(-1)[0])


def _scalar(b: GraphBuilder, v: Value, like: Value) -> Value:
    return m.broadcast_to(b, b.cast(b.reshape(v, ()), like.dtype), like.shape)


def _groups(ctx: NodeContext, per: int) -> list[list[Value]]:
    """The optimized tensors' input groups: X..., G..., and per-tensor states."""
    rest = [ctx.input(i) for i in range(2, len(ctx.inputs))]
    n = len(rest) // per
    if n * per != len(rest):
        raise ctx.error(f"{len(rest)} tensor inputs do not form groups of {per}")
    return [[rest[k * n + i] for k in range(per)] for i in range(n)]


def _adagrad(ctx: NodeContext) -> list[Value]:
    b = ctx.b
    decay, eps = float(ctx.attr("decay_factor", 0.0)), float(ctx.attr("epsilon", 0.0))
    norm = float(ctx.attr("norm_coefficient", 0.0))
    t = _step(ctx)
    xs, hs = [], []
    for x, g, h in _groups(ctx, 3):
        r = m.div(b, _scalar(b, ctx.input(0), x), m.like(b, 1 + t * decay, x))
        gr = m.add(b, m.mul(b, m.like(b, norm, x), x), g)
        h_new = m.add(b, h, m.mul(b, gr, gr))
        root = m.add(b, m.sqrt(b, h_new), m.like(b, eps, h_new))
        xs.append(m.sub(b, x, m.div(b, m.mul(b, r, gr), root)))
        hs.append(h_new)
    return [*xs, *hs]


def _adam(ctx: NodeContext) -> list[Value]:
    b = ctx.b
    alpha, beta = float(ctx.attr("alpha", 0.9)), float(ctx.attr("beta", 0.999))
    eps = float(ctx.attr("epsilon", 0.0))
    norm, post = (
        float(ctx.attr("norm_coefficient", 0.0)),
        float(ctx.attr("norm_coefficient_post", 0.0)),
    )
    t = _step(ctx)
    outs: list[list[Value]] = [[], [], []]
    for x, g, v, h in _groups(ctx, 4):
        gr = m.add(b, m.mul(b, m.like(b, norm, x), x), g)
        v_new = m.add(b, m.mul(b, m.like(b, alpha, v), v), m.mul(b, m.like(b, 1 - alpha, gr), gr))
        h_new = m.add(
            b, m.mul(b, m.like(b, beta, h), h), m.mul(b, m.like(b, 1 - beta, gr), m.mul(b, gr, gr))
        )
        root = m.add(b, m.sqrt(b, h_new), m.like(b, eps, h_new))
        r = _scalar(b, ctx.input(0), x)
        if t > 0:
            r = m.mul(b, r, m.like(b, math.sqrt(1 - beta**t) / (1 - alpha**t), x))
        x_new = m.sub(b, x, m.mul(b, r, m.div(b, v_new, root)))
        outs[0].append(m.mul(b, m.like(b, 1 - post, x_new), x_new))
        outs[1].append(v_new)
        outs[2].append(h_new)
    return [*outs[0], *outs[1], *outs[2]]


def _momentum(ctx: NodeContext) -> list[Value]:
    b = ctx.b
    alpha, beta = float(ctx.attr("alpha")), float(ctx.attr("beta"))
    norm, mode = float(ctx.attr("norm_coefficient")), ctx.attr("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise ctx.unsupported(f"mode='{mode}'")
    t = _step(ctx)
    xs, vs = [], []
    for x, g, v in _groups(ctx, 3):
        gr = m.add(b, m.mul(b, m.like(b, norm, x), x), g)
        v_new = m.add(
            b, m.mul(b, m.like(b, alpha, v), v), m.mul(b, m.like(b, beta if t > 0 else 1.0, gr), gr)
        )
        r = _scalar(b, ctx.input(0), x)
        step = (
            v_new if mode == "standard" else m.add(b, gr, m.mul(b, m.like(b, alpha, v_new), v_new))
        )
        xs.append(m.sub(b, x, m.mul(b, r, step)))
        vs.append(v_new)
    return [*xs, *vs]


# ---- ai.onnx.ml ----------------------------------------------------------------------------


def _binarizer(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    threshold = float(ctx.attr("threshold", 0.0))
    return [b.cast(b.binary(Op.CMPLT, m.like(b, threshold, x), x), x.dtype)]


def _array_feature_extractor(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    idx = ctx.input(1)
    flat = b.reshape(b.cast(idx, DType.I64), (math.prod(idx.shape),))
    out = b.gather(x, flat, x.ndim - 1)
    return [b.reshape(out, (1, flat.shape[0])) if x.ndim == 1 else out]


#: (domain, op) -> lowering, for the domains other than the default one
DOMAIN_OPS: dict[tuple[str, str], Lowering] = {
    ("ai.onnx.preview.training", "Adagrad"): _adagrad,
    ("ai.onnx.preview.training", "Adam"): _adam,
    ("ai.onnx.preview.training", "Momentum"): _momentum,
    ("ai.onnx.ml", "Binarizer"): _binarizer,
    ("ai.onnx.ml", "ArrayFeatureExtractor"): _array_feature_extractor,
}
