"""ONNX RNN, GRU and LSTM, unrolled over the (static) sequence length.

The input projection X @ W^T of every step is one batched contraction; each step then adds
H @ R^T and applies the gates.  Directions forward, reverse and bidirectional, both
layouts, initial states, biases, peepholes, `clip` and `linear_before_reset` are
supported; `sequence_lens` only when every sequence is full length (a constant)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from luminal.compiler.frontend.compose import contraction, shape
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import GraphBuilder, Value

Act = Callable[[Value], Value]
MAX_STEPS = 512


def _activation(ctx: NodeContext, name: str, alpha: float | None, beta: float | None) -> Act:
    b = ctx.b
    key = name.lower()
    if key == "sigmoid":
        return lambda x: m.sigmoid(b, x)
    if key == "tanh":
        return lambda x: m.tanh(b, x)
    if key == "relu":
        return lambda x: m.relu(b, x)
    if key == "affine":
        a, c = alpha if alpha is not None else 1.0, beta if beta is not None else 0.0
        return lambda x: m.add(b, m.mul(b, x, m.like(b, a, x)), m.like(b, c, x))
    raise ctx.unsupported(f"activation '{name}'")


def _activations(ctx: NodeContext, defaults: list[str], dirs: int) -> list[list[Act]]:
    names = ctx.attr("activations") or defaults * dirs
    if len(names) == len(defaults):
        names = list(names) * dirs
    alphas = list(ctx.attr("activation_alpha") or [])
    betas = list(ctx.attr("activation_beta") or [])
    acts = [
        _activation(
            ctx, n, alphas[k] if k < len(alphas) else None, betas[k] if k < len(betas) else None
        )
        for k, n in enumerate(names)
    ]
    per = len(defaults)
    if len(acts) != per * dirs:
        raise ctx.error(f"{len(acts)} activations for {dirs} direction(s) of {per}")
    return [acts[d * per : (d + 1) * per] for d in range(dirs)]


def _row(b: GraphBuilder, v: Value, d: int) -> Value:
    """Direction d of a [dirs, ...] tensor, without the leading axis."""
    part = b.slice(v, [(d, 1, 1), *((0, 1, n) for n in v.shape[1:])])
    return b.reshape(part, v.shape[1:])


def _cols(b: GraphBuilder, v: Value, k: int, width: int) -> Value:
    """Columns [k*width, (k+1)*width) of the last axis."""
    return b.slice(v, [*((0, 1, n) for n in v.shape[:-1]), (k * width, 1, width)])


def _run(ctx: NodeContext, gates: int, defaults: list[str], cell) -> list[Value]:  # type: ignore[no-untyped-def]
    b = ctx.b
    x, w, r = ctx.input(0), ctx.input(1), ctx.input(2)
    bias = ctx.optional(3)
    layout = int(ctx.attr("layout", 0))
    direction = ctx.attr("direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    if direction not in ("forward", "reverse", "bidirectional") or w.shape[0] != dirs:
        raise ctx.error(f"direction '{direction}' does not fit weights {w.shape}")
    hidden = r.shape[-1]
    if ctx.has_attr("hidden_size") and int(ctx.attr("hidden_size")) != hidden:
        raise ctx.error("hidden_size does not match the weights")
    clip = ctx.attr("clip")
    if layout:
        x = b.permute(x, (1, 0, 2))
    steps, batch = x.shape[0], x.shape[1]
    if steps > MAX_STEPS:
        raise ctx.unsupported(f"a sequence of {steps} steps (unrolled up to {MAX_STEPS})")
    lens = ctx.const(4, "sequence_lens")
    if lens is not None and np.any(np.asarray(lens) != steps):
        raise ctx.unsupported("sequence_lens shorter than the sequence")
    states = []
    for k in (5, 6) if gates == 4 else (5,):
        s = ctx.optional(k)
        if s is not None and layout:
            s = b.permute(s, (1, 0, 2))
        states.append(s if s is not None else m.full(b, 0.0, (dirs, batch, hidden), x.dtype))
    acts = _activations(ctx, defaults, dirs)
    ys, finals = [], []
    for d in range(dirs):
        wd, rd = _row(b, w, d), _row(b, r, d)
        proj = contraction.matmul(b, x, b.permute(wd, (1, 0)))  # [steps, batch, gates*h]
        rt = b.permute(rd, (1, 0))
        bsum = None
        if bias is not None:
            bd = _row(b, bias, d)
            half = gates * hidden
            wb, rb = b.slice(bd, [(0, 1, half)]), b.slice(bd, [(half, 1, half)])
            bsum = (wb, rb)
        state = [_row(b, s, d) for s in states]
        order = range(steps - 1, -1, -1) if (direction == "reverse" or d == 1) else range(steps)
        outs: dict[int, Value] = {}
        for t in order:
            xt = b.reshape(
                b.slice(proj, [(t, 1, 1), (0, 1, batch), (0, 1, gates * hidden)]),
                (batch, gates * hidden),
            )
            hr = contraction.matmul(b, state[0], rt)
            state = cell(ctx, xt, hr, state, bsum, hidden, acts[d], clip, d)
            outs[t] = state[0]
        ys.append(
            shape.concat(b, [b.reshape(outs[t], (1, 1, batch, hidden)) for t in range(steps)], 0)
        )
        finals.append([b.reshape(s, (1, batch, hidden)) for s in state])
    y = shape.concat(b, ys, 1)  # [steps, dirs, batch, hidden]
    last = [shape.concat(b, [f[k] for f in finals], 0) for k in range(len(states))]
    if layout:
        y = b.permute(y, (2, 0, 1, 3))
        last = [b.permute(v, (1, 0, 2)) for v in last]
    return [y, *last]


def _clip(b: GraphBuilder, v: Value, clip: float | None) -> Value:
    if clip is None:
        return v
    return m.clip(b, v, m.like(b, -float(clip), v), m.like(b, float(clip), v))


def _gate_sum(b: GraphBuilder, xt: Value, hr: Value, bsum, k: int, h: int) -> Value:  # type: ignore[no-untyped-def]
    total = m.add(b, _cols(b, xt, k, h), _cols(b, hr, k, h))
    if bsum is not None:
        total = m.add(b, total, m.add(b, _cols(b, bsum[0], k, h), _cols(b, bsum[1], k, h)))
    return total


def _rnn_cell(ctx, xt, hr, state, bsum, h, acts, clip, d):  # type: ignore[no-untyped-def]
    return [acts[0](_clip(ctx.b, _gate_sum(ctx.b, xt, hr, bsum, 0, h), clip))]


def _gru_cell(ctx, xt, hr, state, bsum, h, acts, clip, d):  # type: ignore[no-untyped-def]
    b, f, g = ctx.b, acts[0], acts[1]
    (hp,) = state
    z = f(_clip(b, _gate_sum(b, xt, hr, bsum, 0, h), clip))
    r = f(_clip(b, _gate_sum(b, xt, hr, bsum, 1, h), clip))
    wb = _cols(b, bsum[0], 2, h) if bsum is not None else None
    rb = _cols(b, bsum[1], 2, h) if bsum is not None else None
    rt = b.permute(_row(b, ctx.input(2), d), (1, 0))
    r_h = _cols(b, rt, 2, h)  # [h, h] recurrence weights of the h gate
    if int(ctx.attr("linear_before_reset", 0)):
        inner = _cols(b, hr, 2, h) if rb is None else m.add(b, _cols(b, hr, 2, h), rb)
        pre = m.add(b, _cols(b, xt, 2, h), m.mul(b, r, inner))
    else:
        pre = m.add(b, _cols(b, xt, 2, h), contraction.matmul(b, m.mul(b, r, hp), r_h))
        if rb is not None:
            pre = m.add(b, pre, rb)
    if wb is not None:
        pre = m.add(b, pre, wb)
    hh = g(_clip(b, pre, clip))
    one = m.like(b, 1, z)
    return [m.add(b, m.mul(b, m.sub(b, one, z), hh), m.mul(b, z, hp))]


def _lstm_cell(ctx, xt, hr, state, bsum, h, acts, clip, d):  # type: ignore[no-untyped-def]
    b, f, g, hact = ctx.b, acts[0], acts[1], acts[2]
    _, cp = state
    peep = ctx.optional(7)
    p_i = p_o = p_f = None
    if peep is not None:
        pd = _row(b, peep, d)
        p_i, p_o, p_f = (b.slice(pd, [(k * h, 1, h)]) for k in range(3))
    pre = [_clip(b, _gate_sum(b, xt, hr, bsum, k, h), clip) for k in range(4)]  # i o f c
    i = f(pre[0] if p_i is None else m.add(b, pre[0], m.mul(b, p_i, cp)))
    fg = f(pre[2] if p_f is None else m.add(b, pre[2], m.mul(b, p_f, cp)))
    c = m.add(b, m.mul(b, fg, cp), m.mul(b, i, g(pre[3])))
    o = f(pre[1] if p_o is None else m.add(b, pre[1], m.mul(b, p_o, c)))
    return [m.mul(b, o, hact(c)), c]


def _lstm(ctx: NodeContext) -> list[Value]:
    if int(ctx.attr("input_forget", 0)):
        raise ctx.unsupported("input_forget=1")
    return _run(ctx, 4, ["Sigmoid", "Tanh", "Tanh"], _lstm_cell)


OPS: dict[str, Lowering] = {
    "RNN": lambda ctx: _run(ctx, 1, ["Tanh"], _rnn_cell),
    "GRU": lambda ctx: _run(ctx, 3, ["Sigmoid", "Tanh"], _gru_cell),
    "LSTM": _lstm,
}
