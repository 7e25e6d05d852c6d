"""ONNX losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, following the
reference's handling of class weights, ignore_index and the three reductions."""

from __future__ import annotations

from luminal.compiler.frontend.compose import gather as gx
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import norm
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, Op, Value


def _loss(ctx: NodeContext, logp: Value, weights_for_default_ignore: bool) -> Value:
    """Reduced -logp[target] with the reference's weighting.  `weights_for_default_ignore`:
    whether an absent ignore_index still yields unit weights (NLL does, SCE does not)."""
    b = ctx.b
    target = ctx.input(1)
    weight = ctx.optional(2)
    reduction = ctx.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise ctx.unsupported(f"reduction='{reduction}'")
    ignore = ctx.attr("ignore_index")
    if logp.ndim < 2 or target.shape != (logp.shape[0], *logp.shape[2:]):
        raise ctx.error(f"target {target.shape} does not fit input {logp.shape}")
    c = logp.shape[1]
    t = b.cast(target, DType.I64)
    if ignore is None:
        ignored = m.full(b, False, t.shape, DType.BOOL)
    else:
        ignored = b.binary(Op.CMPEQ, t, m.like(b, int(ignore), t))
    safe = b.where(ignored, m.like(b, 0, t), t)
    index = b.reshape(safe, (t.shape[0], 1, *t.shape[1:]))
    picked = b.reshape(gx.gather_elements(b, logp, index, 1), t.shape)
    loss = b.where(ignored, m.like(b, 0, picked), m.neg(b, picked))
    w: Value | None = None
    if weight is not None:
        clipped = m.minimum(b, m.maximum(b, t, m.like(b, 0, t)), m.like(b, c - 1, t))
        w = b.gather(weight, clipped, 0)
        if ignore is not None:
            w = b.where(ignored, m.like(b, 0, w), w)
    elif ignore is not None or (weights_for_default_ignore and ignore != -1):
        w = b.where(ignored, m.full(b, 0, t.shape, logp.dtype), m.full(b, 1, t.shape, logp.dtype))
    axes = list(range(loss.ndim))
    if w is not None:
        loss = m.mul(b, w, loss)
        if reduction == "mean":
            return m.div(b, m.reduce_sum(b, loss, axes, False), m.reduce_sum(b, w, axes, False))
    if reduction == "mean":
        return m.reduce_mean(b, loss, axes, False)
    if reduction == "sum":
        return m.reduce_sum(b, loss, axes, False)
    return loss


def _nll(ctx: NodeContext) -> list[Value]:
    return [_loss(ctx, ctx.input(0), weights_for_default_ignore=True)]


def _sce(ctx: NodeContext) -> list[Value]:
    logp = norm.log_softmax(ctx.b, ctx.input(0), 1)
    return [_loss(ctx, logp, weights_for_default_ignore=False), logp]


OPS: dict[str, Lowering] = {
    "NegativeLogLikelihoodLoss": _nll,
    "SoftmaxCrossEntropyLoss": _sce,
}
