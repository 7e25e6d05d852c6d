"""Data movement: concatenation, splitting, slicing with framework semantics, tril/triu."""

from __future__ import annotations

from collections.abc import Sequence

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import DType, GraphBuilder, Op, Value
from luminal.errors import GraphError


def concat(b: GraphBuilder, xs: Sequence[Value], axis: int) -> Value:
    """Pad each part with zeros out to the full extent, then add (OR for bool)."""
    xs = [x for x in xs if x.shape[axis] != 0] or list(xs[:1])
    if len(xs) == 1:
        return xs[0]
    total = sum(x.shape[axis] for x in xs)
    out: Value | None = None
    offset = 0
    for x in xs:
        widths = [(0, 0)] * x.ndim
        widths[axis] = (offset, total - offset - x.shape[axis])
        offset += x.shape[axis]
        part = b.pad(x, widths, False if x.dtype is DType.BOOL else 0)
        out = part if out is None else b.binary(Op.ADD, out, part)
    assert out is not None
    return out


def split(b: GraphBuilder, x: Value, sizes: Sequence[int], axis: int) -> list[Value]:
    if sum(sizes) != x.shape[axis]:
        raise GraphError(f"split sizes {list(sizes)} do not add up to {x.shape[axis]}")
    parts, start = [], 0
    for size in sizes:
        spec = [(0, 1, d) for d in x.shape]
        spec[axis] = (start, 1, size)
        parts.append(b.slice(x, spec))
        start += size
    return parts


def slice_axes(
    b: GraphBuilder,
    x: Value,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int],
    steps: Sequence[int],
) -> Value:
    """Python/ONNX slicing: negative indices count from the end, bounds are clamped."""
    spec = [(0, 1, d) for d in x.shape]
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if step == 0:
            raise GraphError("slice step cannot be 0")
        ax = axis % x.ndim
        picked = range(*slice(int(start), int(end), int(step)).indices(x.shape[ax]))
        spec[ax] = (picked.start if len(picked) else 0, int(step), len(picked))
    return b.slice(x, spec)


def unsqueeze(b: GraphBuilder, x: Value, axes: Sequence[int]) -> Value:
    rank = x.ndim + len(axes)
    norm = sorted(a % rank for a in axes)
    shape = list(x.shape)
    for a in norm:
        shape.insert(a, 1)
    return b.reshape(x, shape)


def squeeze(b: GraphBuilder, x: Value, axes: Sequence[int] | None) -> Value:
    if axes is None:
        return b.reshape(x, [d for d in x.shape if d != 1])
    norm = {a % x.ndim for a in axes}
    for a in norm:
        if x.shape[a] != 1:
            raise GraphError(f"cannot squeeze axis {a} of size {x.shape[a]}")
    return b.reshape(x, [d for k, d in enumerate(x.shape) if k not in norm])


def flatten(b: GraphBuilder, x: Value, axis: int) -> Value:
    axis = axis + x.ndim if axis < 0 else axis
    lead = 1
    for d in x.shape[:axis]:
        lead *= d
    rest = 1
    for d in x.shape[axis:]:
        rest *= d
    return b.reshape(x, (lead, rest))


def triangle(b: GraphBuilder, x: Value, upper: bool, k: int) -> Value:
    """Keep the upper (col - row >= k) or lower (col - row <= k) triangle, zero the rest."""
    if x.ndim < 2:
        raise GraphError("tril/triu needs at least 2 dimensions")
    rows = b.iota(x.shape[-2:], 0)
    cols = b.iota(x.shape[-2:], 1)
    diff = b.binary(Op.ADD, cols, m.neg(b, rows))
    bound = m.like(b, k, diff)
    if upper:
        keep = m.logical_not(b, b.binary(Op.CMPLT, diff, bound))
    else:
        keep = m.logical_not(b, b.binary(Op.CMPLT, bound, diff))
    keep = m.broadcast_to(b, keep, x.shape)
    zero = m.like(b, False if x.dtype is DType.BOOL else 0, x)
    return b.where(keep, x, zero)


def gather(b: GraphBuilder, data: Value, indices: Value, axis: int) -> Value:
    """Gather with negative indices counted from the end (ONNX, numpy.take)."""
    dim = data.shape[axis % data.ndim]
    const = b.const_value(indices)
    if const is not None:
        bad = (const < -dim) | (const >= dim)
        if bad.any():
            raise GraphError(f"gather index {int(const[bad].flat[0])} out of range for dim {dim}")
        fixed = b.const((const % dim if dim else const).astype(const.dtype))
        return b.gather(data, fixed, axis)
    neg = b.binary(Op.CMPLT, indices, m.like(b, 0, indices))
    wrapped = b.binary(Op.ADD, indices, m.like(b, dim, indices))
    return b.gather(data, b.where(neg, wrapped, indices), axis)
