"""ONNX Attention (opsets 23-25) and RotaryEmbedding, as the reference defines them.

Attention: optional 3-D inputs split into heads; the scale is applied as sqrt(scale) to
both Q and K; the past cache is concatenated; an additive bias gathers the attention mask
(bool masks become 0 / -inf), the causal mask (bottom-right aligned to the cache), the
sliding window and the key padding; grouped-query heads repeat each KV head; softcap
precedes the bias; a fully masked row yields zeros.  With f16 or bf16 inputs, every
intermediate the reference rounds to the input type is rounded here too (`ctx.round`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from luminal.compiler.frontend.compose import contraction, shape
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, GraphBuilder, Op, Value

Round = Callable[[Value], Value]


def _split_heads(ctx: NodeContext, x: Value, heads: int | None, what: str) -> Value:
    if heads is None or heads <= 0 or x.shape[2] % heads:
        raise ctx.error(f"3-D {what} of width {x.shape[2]} needs a head count that divides it")
    bsz, seq, width = x.shape
    return ctx.b.permute(ctx.b.reshape(x, (bsz, seq, heads, width // heads)), (0, 2, 1, 3))


def _neg_inf_where(b: GraphBuilder, allowed: Value, dtype: DType) -> Value:
    """0 where allowed, -inf elsewhere."""
    zero = m.full(b, 0.0, allowed.shape, dtype)
    return b.where(allowed, zero, m.full(b, -math.inf, allowed.shape, dtype))


def _frontier(
    b: GraphBuilder, sq: int, skv: int, offset: int | Value, dtype: DType, test: Callable
) -> Value:
    """0/-inf bias from test(diff) with diff = i + offset - j: [sq, skv] for a fixed
    offset, [batch, 1, sq, skv] for a per-batch one."""
    i = np.arange(sq)[:, None]
    j = np.arange(skv)[None, :]
    if isinstance(offset, int):
        return b.const(np.where(test(i + offset - j), 0.0, -np.inf).astype(dtype.np))
    batch = offset.shape[0]
    full = (batch, 1, sq, skv)
    off = m.broadcast_to(b, b.reshape(b.cast(offset, DType.I64), (batch, 1, 1, 1)), full)
    diff = m.add(b, off, m.broadcast_to(b, b.const((i - j).astype(np.int64)), full))
    return _neg_inf_where(b, test(diff, b), dtype)


def _bias(ctx: NodeContext, sq: int, skv: int, batch: int, past: int | None, dtype: DType) -> Value:
    b = ctx.b
    mask, nonpad = ctx.optional(3), ctx.optional(6)
    causal = bool(ctx.attr("is_causal", 0))
    left, right = int(ctx.attr("left_window_size", -1)), int(ctx.attr("right_window_size", -1))
    if mask is not None and mask.shape[-1] < skv:
        widths = [(0, 0)] * (mask.ndim - 1) + [(0, skv - mask.shape[-1])]
        mask = b.pad(mask, widths, False if mask.dtype is DType.BOOL else -math.inf)
    if mask is not None:
        mask = _neg_inf_where(b, mask, dtype) if mask.dtype is DType.BOOL else b.cast(mask, dtype)
    zeros = m.full(b, 0.0, (sq, skv), dtype)
    offset: int | Value = past or 0
    if past is None and nonpad is not None:
        offset = m.sub(b, b.cast(nonpad, DType.I64), m.like(b, sq, b.cast(nonpad, DType.I64)))
    bias = zeros if mask is None else m.add(b, zeros, mask)
    if causal:

        def test(diff, bb=None):  # type: ignore[no-untyped-def]
            if bb is None:
                return diff >= 0
            return m.logical_not(bb, bb.binary(Op.CMPLT, diff, m.like(bb, 0, diff)))

        bias = m.add(b, bias, _frontier(b, sq, skv, offset, dtype, test))
    if left >= 0 or right >= 0:

        def window(diff, bb=None):  # type: ignore[no-untyped-def]
            if bb is None:
                ok = np.ones(diff.shape, bool)
                if left >= 0:
                    ok &= diff <= left
                if right >= 0:
                    ok &= -diff <= right
                return ok
            ok = m.full(bb, True, diff.shape, DType.BOOL)
            if left >= 0:
                ok = m.logical_and(
                    bb, ok, m.logical_not(bb, bb.binary(Op.CMPLT, m.like(bb, left, diff), diff))
                )
            if right >= 0:
                ok = m.logical_and(
                    bb, ok, m.logical_not(bb, bb.binary(Op.CMPLT, diff, m.like(bb, -right, diff)))
                )
            return ok

        bias = m.add(b, bias, _frontier(b, sq, skv, offset, dtype, window))
    if nonpad is not None:
        j = b.iota((batch, 1, 1, skv), 3)
        lens = m.broadcast_to(b, b.reshape(b.cast(nonpad, DType.I64), (batch, 1, 1, 1)), j.shape)
        bias = m.add(b, bias, _neg_inf_where(b, b.binary(Op.CMPLT, j, lens), dtype))
    return bias


def _softmax(b: GraphBuilder, x: Value, r: Round) -> Value:
    """The reference's softmax: a row of -inf gives zeros, not NaN."""
    top = m.reduce_max(b, x, [-1])
    safe = b.where(b.binary(Op.CMPEQ, top, m.like(b, -math.inf, top)), m.like(b, 0, top), top)
    e = r(m.exp(b, r(m.sub(b, x, safe))))
    total = r(m.reduce_sum(b, e, [-1]))
    total = b.where(b.binary(Op.CMPEQ, total, m.like(b, 0, total)), m.like(b, 1, total), total)
    return r(m.div(b, e, total))


def _attention(ctx: NodeContext) -> list[Value]:
    b, r = ctx.b, ctx.round
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    past_k, past_v = ctx.optional(4), ctx.optional(5)
    if (past_k is None) != (past_v is None):
        raise ctx.error("past_key and past_value must be given together")
    if ctx.optional(6) is not None and past_k is not None:
        raise ctx.error("nonpad_kv_seqlen cannot be combined with a past cache")
    q_heads, kv_heads = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    rank3 = q.ndim == 3
    if rank3:
        q = _split_heads(ctx, q, q_heads, "Q")
        k = _split_heads(ctx, k, kv_heads, "K")
        v = _split_heads(ctx, v, kv_heads, "V")
    elif q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ctx.error("Q, K and V must all be 3-D or all 4-D")
    elif ctx.opset >= 25 and (q_heads is not None or kv_heads is not None):
        raise ctx.error("q_num_heads and kv_num_heads must not be given for 4-D inputs")
    scale_attr = ctx.attr("scale")
    scale = 1 / math.sqrt(q.shape[3]) if scale_attr is None else float(scale_attr)
    # sqrt(scale) in the input type, as the reference rounds it
    root = b.const(
        np.asarray(math.sqrt(scale)).astype((ctx.narrow or q.dtype).np).astype(q.dtype.np)
    )
    if past_k is not None and past_v is not None:
        k = shape.concat(b, [past_k, k], 2)
        v = shape.concat(b, [past_v, v], 2)
    present_k, present_v = k, v
    batch, sq, skv = q.shape[0], q.shape[2], k.shape[2]
    bias = _bias(ctx, sq, skv, batch, past_k.shape[2] if past_k is not None else None, q.dtype)
    hq = int(q_heads) if q_heads is not None else q.shape[1]
    hk = int(kv_heads) if kv_heads is not None else k.shape[1]
    if hq != hk:
        if hq % hk or k.shape[1] != v.shape[1]:
            raise ctx.error(f"{hq} query heads do not group over {hk} key/value heads")
        rep = hq // hk

        def repeat(x: Value) -> Value:
            n, h, s, d = x.shape
            y = b.expand(b.reshape(x, (n, h, 1, s, d)), (n, h, rep, s, d))
            return b.reshape(y, (n, h * rep, s, d))

        k, v = repeat(k), repeat(v)
    kt = b.permute(k, (0, 1, 3, 2))
    qk = r(contraction.matmul(b, r(m.mul(b, q, root)), r(m.mul(b, kt, root))))
    softcap = float(ctx.attr("softcap", 0.0))
    if softcap > 0:
        cap = m.like(b, softcap, qk)
        qk = r(m.mul(b, r(m.tanh(b, r(m.div(b, qk, cap)))), cap))
    with_bias = r(m.add(b, qk, bias))
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise ctx.error(f"qk_matmul_output_mode={mode}")
    qk_out = with_bias if mode == 2 else qk
    precision = ctx.attr("softmax_precision")
    rs: Round = r
    if precision is not None:
        want = ctx.dtype(precision)
        rs = (lambda x: x) if want in (DType.F32, DType.F64) else (lambda x: _round_to(b, x, want))
    probs = _softmax(b, rs(with_bias), rs)
    masked_row = b.binary(
        Op.CMPEQ, m.reduce_max(b, bias, [-1]), m.like(b, -math.inf, m.reduce_max(b, bias, [-1]))
    )
    probs = m.where(b, masked_row, m.like(b, 0, probs), probs)
    if mode == 3:
        qk_out = probs
    y = r(contraction.matmul(b, r(probs), v))
    if rank3:
        n, h, s, d = y.shape
        y = b.reshape(b.permute(y, (0, 2, 1, 3)), (n, s, h * d))
    return [y, present_k, present_v, r(qk_out)]


def _round_to(b: GraphBuilder, x: Value, dtype: DType) -> Value:
    return b.cast(b.cast(x, dtype), x.dtype) if x.dtype is DType.F32 else x


def _rotary(ctx: NodeContext) -> list[Value]:
    b, r = ctx.b, ctx.round
    x, cos, sin = ctx.input(0), ctx.input(1), ctx.input(2)
    positions = ctx.optional(3)
    interleaved = bool(ctx.attr("interleaved", 0))
    dim = int(ctx.attr("rotary_embedding_dim", 0))
    heads = ctx.attr("num_heads")
    if x.ndim == 4:
        h = b.permute(x, (0, 2, 1, 3))  # [batch, seq, heads, head]
    elif x.ndim == 3:
        h = _split_heads(ctx, x, int(heads) if heads else None, "input")
        h = b.permute(h, (0, 2, 1, 3))
    else:
        raise ctx.error(f"input must be 3-D or 4-D, got rank {x.ndim}")
    bsz, seq, nh, hs = h.shape
    dim = dim or hs
    half = dim // 2
    if positions is not None:
        cos = b.gather(cos, b.cast(positions, DType.I64), 0)
        sin = b.gather(sin, b.cast(positions, DType.I64), 0)
    if cos.shape[-1] != half or sin.shape[-1] != half:
        raise ctx.error(f"the caches' last dim must be rotary_embedding_dim / 2 = {half}")
    cos = m.broadcast_to(b, b.reshape(cos, (*cos.shape[:-1], 1, half)), (bsz, seq, nh, half))
    sin = m.broadcast_to(b, b.reshape(sin, (*sin.shape[:-1], 1, half)), (bsz, seq, nh, half))
    keep = [(0, 1, bsz), (0, 1, seq), (0, 1, nh)]
    rot = b.slice(h, [*keep, (0, 1, dim)])
    if interleaved:
        x1, x2 = b.slice(rot, [*keep, (0, 2, half)]), b.slice(rot, [*keep, (1, 2, half)])
    else:
        x1, x2 = b.slice(rot, [*keep, (0, 1, half)]), b.slice(rot, [*keep, (half, 1, half)])
    real = r(m.sub(b, r(m.mul(b, cos, x1)), r(m.mul(b, sin, x2))))
    imag = r(m.add(b, r(m.mul(b, sin, x1)), r(m.mul(b, cos, x2))))
    if interleaved:
        pair = shape.concat(
            b, [b.reshape(real, (*real.shape, 1)), b.reshape(imag, (*imag.shape, 1))], 4
        )
        rot = b.reshape(pair, (bsz, seq, nh, dim))
    else:
        rot = shape.concat(b, [real, imag], 3)
    if dim < hs:
        rot = shape.concat(b, [rot, b.slice(h, [*keep, (dim, 1, hs - dim)])], 3)
    if x.ndim == 3:
        return [b.reshape(rot, x.shape)]
    return [b.permute(rot, (0, 2, 1, 3))]


OPS: dict[str, Lowering] = {
    "Attention": _attention,
    "RotaryEmbedding": _rotary,
}
