"""ONNX data-movement and tensor-creation ops; shapes are static, so shape arithmetic
(Shape, Range, ConstantOfShape, ...) folds to constants during lowering."""

from __future__ import annotations

import numpy as np

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import shape as s
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, Value


def _reshape(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    target = ctx.ints(1, "shape")
    assert target is not None
    allow_zero = int(ctx.attr("allowzero", 0))
    out = [x.shape[k] if d == 0 and not allow_zero else d for k, d in enumerate(target)]
    if out.count(-1) > 1:
        raise ctx.error(f"shape {target} has more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        total = int(np.prod(x.shape))
        if known == 0 or total % known:
            raise ctx.error(f"cannot reshape {x.shape} to {target}")
        out[out.index(-1)] = total // known
    if int(np.prod(out)) != int(np.prod(x.shape)):
        raise ctx.error(f"cannot reshape {x.shape} to {target}")
    return [ctx.b.reshape(x, out)]


def _transpose(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    perm = ctx.attr("perm", list(reversed(range(x.ndim))))
    return [ctx.b.permute(x, perm)]


def _axes(ctx: NodeContext, input_index: int, since: int) -> list[int] | None:
    if ctx.opset >= since:
        return ctx.ints(input_index, "axes")
    value = ctx.attr("axes")
    return None if value is None else list(value)


def _squeeze(ctx: NodeContext) -> list[Value]:
    return [s.squeeze(ctx.b, ctx.input(0), _axes(ctx, 1, since=13))]


def _unsqueeze(ctx: NodeContext) -> list[Value]:
    axes = _axes(ctx, 1, since=13)
    if axes is None:
        raise ctx.error("axes are required")
    return [s.unsqueeze(ctx.b, ctx.input(0), axes)]


def _flatten(ctx: NodeContext) -> list[Value]:
    return [s.flatten(ctx.b, ctx.input(0), int(ctx.attr("axis", 1)))]


def _concat(ctx: NodeContext) -> list[Value]:
    xs = [ctx.input(i) for i in range(len(ctx.inputs))]
    axis = int(ctx.attr("axis")) % xs[0].ndim
    return [s.concat(ctx.b, xs, axis)]


def _split(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    axis = int(ctx.attr("axis", 0)) % x.ndim
    sizes = ctx.ints(1, "split") if ctx.opset >= 13 else ctx.attr("split")
    parts = len(ctx.node.output)
    num_outputs = ctx.attr("num_outputs")
    if sizes is None:
        dim = x.shape[axis]
        n = int(num_outputs) if num_outputs is not None else parts
        chunk = -(-dim // n)
        sizes = [min(chunk, dim - k * chunk) for k in range(n)]
    return list(s.split(ctx.b, x, list(sizes), axis))


def _slice(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    if ctx.opset < 10:
        starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
        axes = list(ctx.attr("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = ctx.ints(1, "starts") or [], ctx.ints(2, "ends") or []
        axes = ctx.ints(3, "axes") or list(range(len(starts)))
        steps = ctx.ints(4, "steps") or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error("starts, ends, axes and steps differ in length")
    return [s.slice_axes(ctx.b, x, starts, ends, axes, steps)]


def _gather(ctx: NodeContext) -> list[Value]:
    data, indices = ctx.input(0), ctx.input(1)
    return [s.gather(ctx.b, data, indices, int(ctx.attr("axis", 0)) % data.ndim)]


def _expand(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    target = ctx.ints(1, "shape")
    assert target is not None
    return [m.broadcast_to(ctx.b, x, m.broadcast_shapes(x.shape, tuple(target)))]


def _tile(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    reps = ctx.ints(1, "repeats")
    assert reps is not None
    b = ctx.b
    for axis, r in enumerate(reps):
        if r != 1:
            lead, rest = x.shape[:axis], x.shape[axis:]
            y = b.expand(b.reshape(x, (*lead, 1, *rest)), (*lead, r, *rest))
            x = b.reshape(y, (*lead, r * rest[0], *rest[1:]))
    return [x]


def _pad(ctx: NodeContext) -> list[Value]:
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.unsupported(f"mode='{mode}'")
    x = ctx.input(0)
    if ctx.opset < 11:
        pads, value = list(ctx.attr("pads")), float(ctx.attr("value", 0.0))
        axes = list(range(x.ndim))
    else:
        pads = ctx.ints(1, "pads") or []
        fill = ctx.const(2, "constant_value")
        value = 0 if fill is None or fill.size == 0 else fill.reshape(-1)[0].item()
        axes = [a % x.ndim for a in (ctx.ints(3, "axes") or range(x.ndim))]
    n = len(axes)
    if len(pads) != 2 * n:
        raise ctx.error(f"pads has {len(pads)} entries, expected {2 * n}")
    widths = [(0, 0)] * x.ndim
    for k, a in enumerate(axes):
        widths[a] = (pads[k], pads[k + n])
    if mode != "constant":
        for a, (lo, hi) in enumerate(widths):
            if lo or hi:
                index = _pad_index(x.shape[a], lo, hi, mode)
                if index is None:
                    raise ctx.error(f"mode '{mode}' cannot pad an axis of length {x.shape[a]}")
                x = ctx.b.gather(x, ctx.b.const(index), a)
        return [x]
    # Negative pads crop: slice first, then pad what is positive.
    spec = [
        (max(-lo, 0), 1, d - max(-lo, 0) - max(-hi, 0))
        for d, (lo, hi) in zip(x.shape, widths, strict=True)
    ]
    x = ctx.b.slice(x, spec)
    return [ctx.b.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in widths], value)]


def _pad_index(d: int, lo: int, hi: int, mode: str) -> np.ndarray | None:
    """Source index of every output position of one padded axis (negative pads crop)."""
    p = np.arange(-lo, d + hi, dtype=np.int64)
    if d == 0 or (mode == "reflect" and d == 1 and (lo > 0 or hi > 0)):
        return None
    if mode == "edge":
        return np.clip(p, 0, d - 1)
    if mode == "wrap":
        return p % d
    period = 2 * (d - 1)
    r = p % period
    return np.where(r >= d, period - r, r)


def _constant(ctx: NodeContext) -> list[Value]:
    for name, make in (
        ("value", lambda v: v),
        ("value_float", lambda v: np.array(v, np.float32)),
        ("value_floats", lambda v: np.array(v, np.float32)),
        ("value_int", lambda v: np.array(v, np.int64)),
        ("value_ints", lambda v: np.array(v, np.int64)),
    ):
        if ctx.has_attr(name):
            return [ctx.b.const(make(ctx.attr(name)))]
    raise ctx.unsupported("only numeric tensor constants are supported")


def _constant_of_shape(ctx: NodeContext) -> list[Value]:
    shape = ctx.ints(0, "shape")
    assert shape is not None
    value = ctx.attr("value")
    fill = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(())
    return [m.full(ctx.b, fill.item(), shape, DType.from_numpy(fill.dtype))]


def _shape(ctx: NodeContext) -> list[Value]:
    dims = ctx.input(0).shape
    start, end = int(ctx.attr("start", 0)), ctx.attr("end")
    picked = dims[slice(start, None if end is None else int(end))]
    return [ctx.b.const(np.array(picked, np.int64))]


def _size(ctx: NodeContext) -> list[Value]:
    return [ctx.b.const(np.array(int(np.prod(ctx.input(0).shape)), np.int64))]


def _range(ctx: NodeContext) -> list[Value]:
    start, limit, delta = (ctx.const(i, n) for i, n in enumerate(("start", "limit", "delta")))
    assert start is not None and limit is not None and delta is not None
    if start.size != 1 or limit.size != 1 or delta.size != 1:
        raise ctx.error("start, limit and delta must be scalars")
    start, limit, delta = start.reshape(()), limit.reshape(()), delta.reshape(())
    count = max(int(np.ceil((limit - start) / delta)), 0)
    values = start + np.arange(count, dtype=start.dtype) * delta
    return [ctx.b.const(values.astype(start.dtype))]


def _trilu(ctx: NodeContext) -> list[Value]:
    k = ctx.ints(1, "k")
    return [s.triangle(ctx.b, ctx.input(0), bool(ctx.attr("upper", 1)), k[0] if k else 0)]


def _depth_to_space(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    k, mode = int(ctx.attr("blocksize")), ctx.attr("mode", "DCR")
    n, c, h, w = x.shape
    if c % (k * k):
        raise ctx.error(f"{c} channels do not split into blocks of {k}x{k}")
    if mode == "DCR":
        y = b.permute(b.reshape(x, (n, k, k, c // (k * k), h, w)), (0, 3, 4, 1, 5, 2))
    elif mode == "CRD":
        y = b.permute(b.reshape(x, (n, c // (k * k), k, k, h, w)), (0, 1, 4, 2, 5, 3))
    else:
        raise ctx.unsupported(f"mode='{mode}'")
    return [b.reshape(y, (n, c // (k * k), h * k, w * k))]


def _space_to_depth(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    k, mode = int(ctx.attr("blocksize")), ctx.attr("mode", "DCR")
    n, c, h, w = x.shape
    if h % k or w % k:
        raise ctx.error(f"{h}x{w} does not split into blocks of {k}x{k}")
    if mode not in ("DCR", "CRD"):
        raise ctx.unsupported(f"mode='{mode}'")
    order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    y = b.permute(b.reshape(x, (n, c, h // k, k, w // k, k)), order)
    return [b.reshape(y, (n, c * k * k, h // k, w // k))]


def _identity(ctx: NodeContext) -> list[Value]:
    return [ctx.input(0)]


OPS: dict[str, Lowering] = {
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Flatten": _flatten,
    "Concat": _concat,
    "Split": _split,
    "Slice": _slice,
    "Gather": _gather,
    "Expand": _expand,
    "Tile": _tile,
    "Pad": _pad,
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Shape": _shape,
    "Size": _size,
    "Range": _range,
    "Trilu": _trilu,
    "Identity": _identity,
    "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth,
}
