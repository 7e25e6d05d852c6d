"""Element-wise indexing, scans, products, arg-extremes and top-k from IR primitives.

Indexing ops address the data as one flat vector: a flat index is built from the index
tensor and iotas, and one GATHER (or SCATTER) reads (or writes) it.  An index outside
its axis becomes -1, which the GATHER rejects at run time instead of reading elsewhere.
Scatters with a reduction, scans and top-k compare every position with every candidate
(an O(n*m) select-and-reduce): exact, with no multiplication by 0 or 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import DType, GraphBuilder, Op, Value
from luminal.errors import GraphError

REDUCTIONS = ("none", "add", "mul", "max", "min")


def normalize_index(b: GraphBuilder, index: Value, dim: int) -> Value:
    """Negative indices count from the end; anything outside [-dim, dim) becomes -1."""
    index = b.cast(index, DType.I64)
    neg = b.binary(Op.CMPLT, index, m.like(b, 0, index))
    fixed = b.where(neg, m.add(b, index, m.like(b, dim, index)), index)
    ok = m.logical_and(
        b,
        m.logical_not(b, b.binary(Op.CMPLT, fixed, m.like(b, 0, fixed))),
        b.binary(Op.CMPLT, fixed, m.like(b, dim, fixed)),
    )
    return b.where(ok, fixed, m.like(b, -1, fixed))


def _flat_target(b: GraphBuilder, shape: Sequence[int], index: Value, axis: int) -> Value:
    """Flat position in `shape` of every element of `index`, whose values replace the
    coordinate on `axis` (ScatterElements / GatherElements addressing)."""
    strides = [math.prod(shape[k + 1 :]) for k in range(len(shape))]
    idx = normalize_index(b, index, shape[axis])
    flat = b.binary(Op.MUL, idx, m.like(b, strides[axis], idx))
    for k in range(len(shape)):
        if k != axis and index.shape[k] > 1:
            coord = b.iota(index.shape, k)
            flat = b.binary(Op.ADD, flat, b.binary(Op.MUL, coord, m.like(b, strides[k], coord)))
    bad = b.binary(Op.CMPLT, idx, m.like(b, 0, idx))
    return b.where(bad, m.like(b, -1, flat), flat)


def gather_elements(b: GraphBuilder, data: Value, index: Value, axis: int) -> Value:
    if index.ndim != data.ndim:
        raise GraphError(f"indices rank {index.ndim} differs from data rank {data.ndim}")
    flat = _flat_target(b, data.shape, index, axis)
    return b.gather(b.reshape(data, (math.prod(data.shape),)), flat, 0)


def _combine(
    b: GraphBuilder, reduction: str, data: Value, mask: Value, upd: Value, axis: int
) -> Value:
    """data (op)= reduce over `axis` of the updates selected by `mask`."""
    if reduction == "add":
        part = reduce_prod_or_sum(b, b.where(mask, upd, m.like(b, 0, upd)), axis, "add")
        return m.add(b, data, part)
    if reduction == "mul":
        part = reduce_prod_or_sum(b, b.where(mask, upd, m.like(b, 1, upd)), axis, "mul")
        return m.mul(b, data, part)
    if reduction == "max":
        part = m.reduce_max(
            b, b.where(mask, upd, m.like(b, m.lowest(upd.dtype), upd)), [axis], False
        )
        return m.maximum(b, data, part)
    if reduction == "min":
        low = -m.lowest(upd.dtype) if upd.dtype.is_float else int(np.iinfo(upd.dtype.np).max)
        part = m.reduce_min(b, b.where(mask, upd, m.like(b, low, upd)), [axis], False)
        return m.minimum(b, data, part)
    raise GraphError(f"unknown scatter reduction '{reduction}'")


def reduce_prod_or_sum(b: GraphBuilder, x: Value, axis: int, op: str) -> Value:
    return m.reduce_sum(b, x, [axis], False) if op == "add" else reduce_prod(b, x, [axis], False)


def scatter_elements(
    b: GraphBuilder, data: Value, index: Value, updates: Value, axis: int, reduction: str
) -> Value:
    if reduction == "none":
        idx = normalize_index(b, index, data.shape[axis])
        return b.scatter(data, idx, updates, axis)
    u = math.prod(index.shape)
    flat = b.reshape(_flat_target(b, data.shape, index, axis), (u,))
    rows = b.reshape(data, (math.prod(data.shape), 1))
    return _scatter_rows(b, rows, flat, b.reshape(updates, (u, 1)), reduction, data.shape)


def _scatter_rows(
    b: GraphBuilder, rows: Value, target: Value, upd: Value, reduction: str, shape: Sequence[int]
) -> Value:
    """rows [R, C]; target [U] row numbers; upd [U, C]: apply `reduction` per row."""
    n_rows, cols = rows.shape
    u = target.shape[0]
    if reduction == "none":
        idx = b.expand(b.reshape(target, (u, 1)), (u, cols))
        return b.reshape(b.scatter(rows, idx, upd, 0), tuple(shape))
    full = (n_rows, u, cols)
    hit = b.binary(Op.CMPEQ, b.iota((n_rows, u), 0), m.broadcast_to(b, target, (n_rows, u)))
    mask = b.expand(b.reshape(hit, (n_rows, u, 1)), full)
    upd3 = b.expand(b.reshape(upd, (1, u, cols)), full)
    out = _combine(b, reduction, rows, mask, upd3, 1)
    # An index out of range matches no row: read it once through a GATHER, which rejects
    # it at run time, and add the zero that read returns.
    probe = b.gather(m.full(b, 0, (n_rows,), out.dtype), target, 0)
    zero = m.reduce_sum(b, probe, [0], keepdims=True)
    return b.reshape(m.add(b, out, b.reshape(zero, (1, 1))), tuple(shape))


def _row_numbers(b: GraphBuilder, index: Value, dims: Sequence[int]) -> Value:
    """index [..., k] into dims (k of them) -> flat row number [...], -1 when out of range."""
    k = index.shape[-1]
    lead = index.shape[:-1]
    row: Value | None = None
    bad: Value | None = None
    for i in range(k):
        spec = [(0, 1, d) for d in lead] + [(i, 1, 1)]
        comp = normalize_index(b, b.reshape(b.slice(index, spec), lead), dims[i])
        stride = math.prod(dims[i + 1 : k])
        term = b.binary(Op.MUL, comp, m.like(b, stride, comp))
        row = term if row is None else b.binary(Op.ADD, row, term)
        neg = b.binary(Op.CMPLT, comp, m.like(b, 0, comp))
        bad = neg if bad is None else m.logical_or(b, bad, neg)
    if row is None:
        return m.full(b, 0, lead, DType.I64)
    assert bad is not None
    return b.where(bad, m.like(b, -1, row), row)


def scatter_nd(b: GraphBuilder, data: Value, index: Value, updates: Value, reduction: str) -> Value:
    k = index.shape[-1]
    if k > data.ndim:
        raise GraphError(f"ScatterND index depth {k} exceeds data rank {data.ndim}")
    n_rows, cols = math.prod(data.shape[:k]), math.prod(data.shape[k:])
    u = math.prod(index.shape[:-1])
    target = b.reshape(_row_numbers(b, index, data.shape[:k]), (u,))
    rows = b.reshape(data, (n_rows, cols))
    return _scatter_rows(b, rows, target, b.reshape(updates, (u, cols)), reduction, data.shape)


def gather_nd(b: GraphBuilder, data: Value, index: Value, batch_dims: int) -> Value:
    k = index.shape[-1]
    batch = data.shape[:batch_dims]
    if index.shape[:batch_dims] != batch:
        raise GraphError("GatherND batch dims of data and indices differ")
    n_batch = math.prod(batch)
    dims = data.shape[batch_dims : batch_dims + k]
    rest = data.shape[batch_dims + k :]
    n_rows = math.prod(dims)
    mid = index.shape[batch_dims:-1]
    n_mid = math.prod(mid)
    idx = b.reshape(index, (n_batch, n_mid, k))
    row = _row_numbers(b, idx, dims)  # [n_batch, n_mid]
    base = b.binary(
        Op.MUL, b.iota((n_batch, n_mid), 0), m.full(b, n_rows, (n_batch, n_mid), DType.I64)
    )
    flat = b.where(b.binary(Op.CMPLT, row, m.like(b, 0, row)), row, b.binary(Op.ADD, row, base))
    table = b.reshape(data, (n_batch * n_rows, math.prod(rest)))
    out = b.gather(table, flat, 0)  # [n_batch, n_mid, rest]
    return b.reshape(out, (*batch, *mid, *rest))


# ---- products, scans, arg-extremes, top-k ----------------------------------------------


def _prod_last(b: GraphBuilder, x: Value) -> Value:
    """Product over the last axis by halving: log2(n) elementwise multiplies."""
    n = x.shape[-1]
    lead = x.shape[:-1]
    keep = [(0, 1, d) for d in lead]
    if n == 0:
        return m.full(b, 1, (*lead, 1), x.dtype)
    while n > 1:
        if n % 2:
            x = b.pad(x, [(0, 0)] * len(lead) + [(0, 1)], True if x.dtype is DType.BOOL else 1)
            n += 1
        half = n // 2
        x = b.binary(
            Op.MUL, b.slice(x, [*keep, (0, 1, half)]), b.slice(x, [*keep, (half, 1, half)])
        )
        n = half
    return x


def reduce_prod(b: GraphBuilder, x: Value, axes: Sequence[int], keepdims: bool = True) -> Value:
    if x.ndim == 0:
        return x
    red = sorted({a % x.ndim for a in axes})
    kept = [k for k in range(x.ndim) if k not in red]
    moved = b.permute(x, kept + red)
    flat = b.reshape(moved, (*(x.shape[k] for k in kept), math.prod(x.shape[k] for k in red)))
    out = _prod_last(b, flat)
    if keepdims:
        return b.reshape(out, tuple(1 if k in red else d for k, d in enumerate(x.shape)))
    return b.reshape(out, tuple(x.shape[k] for k in kept))


def _to_last(b: GraphBuilder, x: Value, axis: int) -> tuple[Value, list[int]]:
    perm = [k for k in range(x.ndim) if k != axis] + [axis]
    inverse = [perm.index(k) for k in range(x.ndim)]
    return b.permute(x, perm), inverse


def cumulative(
    b: GraphBuilder, x: Value, axis: int, exclusive: bool, reverse: bool, prod: bool
) -> Value:
    n = x.shape[axis]
    if n == 0:
        return x
    last, inverse = _to_last(b, x, axis)
    lead = last.shape[:-1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    take = (j >= i if reverse else j <= i) & ~((j == i) if exclusive else np.zeros((n, n), bool))
    full = (*lead, n, n)
    mask = m.broadcast_to(b, b.const(take), full)
    xe = b.expand(b.reshape(last, (*lead, 1, n)), full)
    picked = b.where(mask, xe, m.like(b, 1 if prod else 0, xe))
    if prod:
        out = b.reshape(_prod_last(b, picked), (*lead, n))
    else:
        out = m.reduce_sum(b, picked, [-1], keepdims=False)
    return b.permute(out, inverse)


def arg_extreme(
    b: GraphBuilder, x: Value, axis: int, largest: bool, keepdims: bool, last: bool
) -> Value:
    """Index of the first (or last) max (or min) along `axis`; a NaN wins, as in numpy."""
    n = x.shape[axis]
    best = (m.reduce_max if largest else m.reduce_min)(b, x, [axis], True)
    best = b.expand(best, x.shape)
    hit = b.binary(Op.CMPEQ, x, best)
    if x.dtype.is_float:
        nan_x = m.logical_not(b, b.binary(Op.CMPEQ, x, x))
        nan_best = m.logical_not(b, b.binary(Op.CMPEQ, best, best))
        hit = m.logical_or(b, hit, m.logical_and(b, nan_x, nan_best))
    idx = b.iota(x.shape, axis)
    if last:
        out = m.reduce_max(b, b.where(hit, idx, m.like(b, -1, idx)), [axis], keepdims)
    else:
        out = m.reduce_min(b, b.where(hit, idx, m.like(b, n, idx)), [axis], keepdims)
    return out


def topk(b: GraphBuilder, x: Value, k: int, axis: int, largest: bool) -> tuple[Value, Value]:
    """The k largest (or smallest) along `axis`, sorted, ties to the lower index."""
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise GraphError(f"k={k} is outside [0, {n}]")
    last, inverse = _to_last(b, x, axis)
    lead = last.shape[:-1]
    full = (*lead, n, n)  # [..., i, j]
    xi = b.expand(b.reshape(last, (*lead, n, 1)), full)
    xj = b.expand(b.reshape(last, (*lead, 1, n)), full)
    beats = b.binary(Op.CMPLT, xi, xj) if largest else b.binary(Op.CMPLT, xj, xi)
    earlier = m.broadcast_to(b, b.const(np.arange(n)[None, :] < np.arange(n)[:, None]), full)
    ahead = m.logical_or(b, beats, m.logical_and(b, b.binary(Op.CMPEQ, xi, xj), earlier))
    rank = m.reduce_sum(b, b.cast(ahead, DType.I64), [-1], keepdims=False)  # [..., i]
    sel = (*lead, k, n)  # [..., r, i]
    rank_e = b.expand(b.reshape(rank, (*lead, 1, n)), sel)
    slot = m.broadcast_to(b, b.const(np.arange(k, dtype=np.int64)[:, None]), sel)
    hit = b.binary(Op.CMPEQ, rank_e, slot)
    vals = b.expand(b.reshape(last, (*lead, 1, n)), sel)
    fill = m.lowest(x.dtype)
    values = m.reduce_max(b, b.where(hit, vals, m.like(b, fill, vals)), [-1], keepdims=False)
    pos = b.iota(sel, len(sel) - 1)
    indices = m.reduce_max(b, b.where(hit, pos, m.like(b, -1, pos)), [-1], keepdims=False)
    return b.permute(values, inverse), b.permute(indices, inverse)
