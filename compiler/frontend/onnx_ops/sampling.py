"""ONNX GridSample: sampling at run-time coordinates, as the reference defines it.

Per spatial axis the normalized coordinate is denormalized (align_corners or not),
rounded (nearest) and brought inside the border (border: clamp, reflection: fold); the
neighbours (1, 2 or 4 per axis) and their weights follow, every neighbour index again
under the padding rule (zeros: outside reads 0).  The sample is the weighted sum over
every combination of neighbours, each read with one flat GATHER.
"""

from __future__ import annotations

import itertools
import math

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import special as sp
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, GraphBuilder, Op, Value

CUBIC_A = -0.75


def _c(b: GraphBuilder, v: float, like: Value) -> Value:
    return m.like(b, v, like)


def _reflect(b: GraphBuilder, x: Value, lo: float, hi: float) -> Value:
    """Fold x into [lo, hi] by reflecting at the nearer border, repeatedly."""
    span = hi - lo
    if span <= 0:
        return _c(b, lo, x)

    def fold(dx: Value) -> tuple[Value, Value]:
        n = sp.floor(b, m.div(b, dx, _c(b, span, dx)))
        r = m.sub(b, dx, m.mul(b, n, _c(b, span, dx)))
        even = b.binary(Op.CMPEQ, b.binary(Op.MOD, n, _c(b, 2, n)), _c(b, 0, n))
        return r, even

    r_lo, even_lo = fold(m.sub(b, _c(b, lo, x), x))
    below = b.where(even_lo, m.add(b, _c(b, lo, x), r_lo), m.sub(b, _c(b, hi, x), r_lo))
    r_hi, even_hi = fold(m.sub(b, x, _c(b, hi, x)))
    above = b.where(even_hi, m.sub(b, _c(b, hi, x), r_hi), m.add(b, _c(b, lo, x), r_hi))
    return b.where(
        b.binary(Op.CMPLT, x, _c(b, lo, x)),
        below,
        b.where(b.binary(Op.CMPLT, _c(b, hi, x), x), above, x),
    )


def _cubic(b: GraphBuilder, t: Value) -> list[Value]:
    a = CUBIC_A
    out = []
    for s in (m.add(b, t, _c(b, 1, t)), t, m.sub(b, _c(b, 1, t), t), m.sub(b, _c(b, 2, t), t)):
        s = m.abs_(b, s)
        near = m.add(
            b,
            m.mul(b, m.mul(b, m.sub(b, m.mul(b, s, _c(b, a + 2, s)), _c(b, a + 3, s)), s), s),
            _c(b, 1, s),
        )
        far = m.sub(
            b,
            m.mul(
                b,
                m.add(
                    b,
                    m.mul(b, m.sub(b, m.mul(b, s, _c(b, a, s)), _c(b, 5 * a, s)), s),
                    _c(b, 8 * a, s),
                ),
                s,
            ),
            _c(b, 4 * a, s),
        )
        out.append(b.where(b.binary(Op.CMPLT, _c(b, 1, s), s), far, near))
    return out


def _grid_sample(ctx: NodeContext) -> list[Value]:
    b, x, grid = ctx.b, ctx.input(0), ctx.input(1)
    mode = ctx.attr("mode", "linear" if ctx.opset >= 20 else "bilinear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding = ctx.attr("padding_mode", "zeros")
    align = bool(ctx.attr("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic") or padding not in (
        "zeros",
        "border",
        "reflection",
    ):
        raise ctx.unsupported(f"mode='{mode}', padding_mode='{padding}'")
    if not x.dtype.is_float:
        raise ctx.unsupported(f"{x.dtype.value} data")
    n, c, *dims = x.shape
    nd = len(dims)
    out = grid.shape[1:-1]
    if grid.shape[0] != n or grid.shape[-1] != nd or len(out) != nd:
        raise ctx.error(f"grid {grid.shape} does not fit input {x.shape}")
    g = b.cast(grid, DType.F32)
    lead = [(0, 1, v) for v in grid.shape[:-1]]
    taps: list[list[tuple[Value, Value, Value | None]]] = []  # per axis: (index, weight, valid)
    for i, size in enumerate(dims):
        coord = b.reshape(b.slice(g, [*lead, (nd - 1 - i, 1, 1)]), grid.shape[:-1])
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if align:
            v = m.mul(b, m.add(b, coord, _c(b, 1, coord)), _c(b, (size - 1) / 2, coord))
        else:
            v = m.mul(
                b,
                m.sub(
                    b,
                    m.mul(b, m.add(b, coord, _c(b, 1, coord)), _c(b, size, coord)),
                    _c(b, 1, coord),
                ),
                _c(b, 0.5, coord),
            )
        if mode == "nearest":
            v = sp.round_half_even(b, v)
        if padding == "border":
            v = m.clip(b, v, _c(b, 0, v), _c(b, size - 1, v))
        elif padding == "reflection":
            v = _reflect(b, v, lo, hi)
        if mode == "nearest":
            base, offsets, weights = b.cast(v, DType.I64), [0], [_c(b, 1, v)]
        else:
            f = sp.floor(b, v)
            t = m.sub(b, v, f)
            base = b.cast(f, DType.I64)
            if mode == "linear":
                offsets, weights = [0, 1], [m.sub(b, _c(b, 1, t), t), t]
            else:
                offsets, weights = [-1, 0, 1, 2], _cubic(b, t)
        axis_taps = []
        for off, w in zip(offsets, weights, strict=True):
            idx = m.add(b, base, m.like(b, off, base)) if off else base
            valid = None
            if padding == "zeros":
                valid = m.logical_and(
                    b,
                    m.logical_not(b, b.binary(Op.CMPLT, idx, m.like(b, 0, idx))),
                    b.binary(Op.CMPLT, idx, m.like(b, size, idx)),
                )
                idx = b.where(valid, idx, m.like(b, 0, idx))
            elif padding == "border":
                idx = m.clip(b, idx, m.like(b, 0, idx), m.like(b, size - 1, idx))
            else:
                folded = _reflect(b, b.cast(idx, DType.F32), lo, hi)
                idx = m.clip(
                    b, b.cast(folded, DType.I64), m.like(b, 0, idx), m.like(b, size - 1, idx)
                )
            axis_taps.append((idx, w, valid))
        taps.append(axis_taps)
    plane = math.prod(dims)
    table = b.reshape(b.permute(b.reshape(x, (n, c, plane)), (0, 2, 1)), (n * plane, c))
    batch = b.binary(
        Op.MUL, b.iota(tuple(grid.shape[:-1]), 0), m.full(b, plane, grid.shape[:-1], DType.I64)
    )
    total: Value | None = None
    for combo in itertools.product(*taps):
        flat = batch
        weight: Value | None = None
        valid: Value | None = None
        for i, (idx, w, ok) in enumerate(combo):
            stride = math.prod(dims[i + 1 :])
            flat = m.add(b, flat, m.mul(b, idx, m.like(b, stride, idx)))
            weight = w if weight is None else m.mul(b, weight, w)
            if ok is not None:
                valid = ok if valid is None else m.logical_and(b, valid, ok)
        picked = b.gather(table, flat, 0)  # [n, *out, c]
        assert weight is not None
        term = m.mul(b, picked, b.cast(b.reshape(weight, (*weight.shape, 1)), x.dtype))
        if valid is not None:
            term = m.where(b, b.reshape(valid, (*valid.shape, 1)), term, m.like(b, 0, term))
        total = term if total is None else m.add(b, total, term)
    assert total is not None
    return [b.permute(total, (0, nd + 1, *range(1, nd + 1)))]


OPS: dict[str, Lowering] = {"GridSample": _grid_sample}
