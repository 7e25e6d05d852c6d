"""ATen data movement, indexing and tensor creation.  Shapes are static, so creation
ops (full, arange, ...) fold to constants and view ops become IR views."""

from __future__ import annotations

import numpy as np
import torch

from luminal.compiler.frontend.aten_ops.context import (
    IR_TO_TORCH,
    AtenContext,
    Lowering,
    Result,
)
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import shape as s
from luminal.compiler.ir import DType, GraphBuilder, Op, Value
from luminal.errors import GraphError

_ALL = 2**63 - 1  # torch's "to the end" for slice ends


def _reshape(ctx: AtenContext) -> Value:
    x = ctx.tensor("self")
    size = ctx.ints("size") or ctx.ints("shape")
    known = int(np.prod([d for d in size if d != -1]))
    total = int(np.prod(x.shape))
    if size.count(-1) > 1 or (-1 in size and (known == 0 or total % known)):
        raise ctx.error(f"cannot view {x.shape} as {size}")
    out = [total // known if d == -1 else d for d in size]
    return ctx.b.reshape(x, out)


def _permute(ctx: AtenContext) -> Value:
    return ctx.b.permute(ctx.tensor("self"), ctx.ints("dims"))


def _transpose(ctx: AtenContext) -> Value:
    x = ctx.tensor("self")
    if x.ndim < 2:
        return x
    perm = list(range(x.ndim))
    d0, d1 = (int(ctx.arg(n, default)) % x.ndim for n, default in (("dim0", 0), ("dim1", 1)))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return ctx.b.permute(x, perm)


def _expand(ctx: AtenContext) -> Value:
    x = ctx.tensor("self")
    size = ctx.ints("size")
    lead = len(size) - x.ndim
    if lead < 0:
        raise ctx.error(f"cannot expand {x.shape} to {size}")
    full = [x.shape[k - lead] if d == -1 else d for k, d in enumerate(size)]
    return m.broadcast_to(ctx.b, x, full)


def _unsqueeze(ctx: AtenContext) -> Value:
    return s.unsqueeze(ctx.b, ctx.tensor("self"), [int(ctx.arg("dim"))])


def _squeeze(ctx: AtenContext) -> Value:
    x = ctx.tensor("self")
    if x.ndim == 0:
        return x
    dims = ctx.args.get("dim")
    if dims is None:
        return s.squeeze(ctx.b, x, None)
    dims = [dims] if isinstance(dims, int) else dims
    # torch leaves a named axis alone when its size is not 1
    return s.squeeze(ctx.b, x, [d for d in dims if x.shape[d % x.ndim] == 1])


def _slice(ctx: AtenContext) -> Value:
    x = ctx.tensor("self")
    start, end = ctx.arg("start", 0), ctx.arg("end", _ALL)
    step = int(ctx.arg("step", 1))
    if step <= 0:
        raise ctx.error("slice step must be positive")
    return s.slice_axes(ctx.b, x, [start], [end], [int(ctx.arg("dim", 0))], [step])


def _select(ctx: AtenContext) -> Value:
    x = ctx.tensor("self")
    axis = int(ctx.arg("dim")) % x.ndim
    index = int(ctx.arg("index"))
    if not -x.shape[axis] <= index < x.shape[axis]:
        raise ctx.error(f"index {index} out of range for dim {axis} of size {x.shape[axis]}")
    index %= x.shape[axis]
    picked = s.slice_axes(ctx.b, x, [index], [index + 1], [axis], [1])
    return ctx.b.reshape(picked, x.shape[:axis] + x.shape[axis + 1 :])


def _cat(ctx: AtenContext) -> Value:
    dt = ctx.out_dtype
    xs = [ctx.b.cast(x, dt) for x in ctx.tensors("tensors")]
    # torch accepts (and skips) legacy empty 1-D tensors next to higher-rank ones
    ranked = [x for x in xs if not (x.shape == (0,) and any(y.ndim > 1 for y in xs))]
    axis = int(ctx.arg("dim", 0)) % ranked[0].ndim
    return s.concat(ctx.b, ranked, axis)


def _split(ctx: AtenContext) -> list[Value]:
    x = ctx.tensor("self")
    axis = int(ctx.arg("dim", 0)) % x.ndim
    dim = x.shape[axis]
    if "split_sizes" in ctx.args:
        sizes = ctx.ints("split_sizes")
    else:
        size = int(ctx.arg("split_size"))
        sizes = [min(size, dim - k) for k in range(0, dim, size)] if dim else [0]
    return s.split(ctx.b, x, sizes, axis)


def _unbind(ctx: AtenContext) -> list[Value]:
    x = ctx.tensor("self")
    axis = int(ctx.arg("dim", 0)) % x.ndim
    rest = x.shape[:axis] + x.shape[axis + 1 :]
    return [ctx.b.reshape(p, rest) for p in s.split(ctx.b, x, [1] * x.shape[axis], axis)]


def _stack(ctx: AtenContext) -> Value:
    dt = ctx.out_dtype
    xs = [ctx.b.cast(x, dt) for x in ctx.tensors("tensors")]
    axis = int(ctx.arg("dim", 0)) % (xs[0].ndim + 1)
    return s.concat(ctx.b, [s.unsqueeze(ctx.b, x, [axis]) for x in xs], axis)


def _embedding(ctx: AtenContext) -> Value:
    weight, indices = ctx.tensor("weight"), ctx.tensor("indices")
    known = ctx.b.const_value(indices)
    if known is not None and known.size and ((known < 0) | (known >= weight.shape[0])).any():
        raise GraphError(f"embedding index out of range [0, {weight.shape[0]})")
    return ctx.b.gather(weight, indices, 0)


def _index_select(ctx: AtenContext) -> Value:
    x, index = ctx.tensor("self"), ctx.tensor("index")
    if index.ndim == 0:
        index = ctx.b.reshape(index, (1,))
    return s.gather(ctx.b, x, index, int(ctx.arg("dim")) % max(x.ndim, 1))


def _wrap(b: GraphBuilder, index: Value, dim: int) -> Value:
    """Negative indices count from the end; constant indices are range-checked here."""
    known = b.const_value(index)
    if known is not None and known.size and ((known < -dim) | (known >= dim)).any():
        bad = known[(known < -dim) | (known >= dim)].flat[0]
        raise GraphError(f"index {int(bad)} out of range for a dimension of size {dim}")
    index = b.cast(index, DType.I64)
    neg = b.binary(Op.CMPLT, index, m.like(b, 0, index))
    return b.where(neg, b.binary(Op.ADD, index, m.like(b, dim, index)), index)


def _index(ctx: AtenContext) -> Value:
    """Advanced indexing x[i0, i1, ...] with integer index tensors (None = whole axis)."""
    b, x = ctx.b, ctx.tensor("self")
    raw = list(ctx.args.get("indices") or [])
    axes = [k for k, v in enumerate(raw) if v is not None]
    if not axes:
        return x
    if any(not isinstance(raw[k], Value) or not raw[k].dtype.is_int for k in axes):
        raise ctx.unsupported("only integer index tensors are supported (no boolean masks)")
    shape = m.broadcast_shapes(*(raw[k].shape for k in axes))
    linear: Value | None = None
    for k in axes:  # row-major linear index over the indexed axes
        idx = m.broadcast_to(b, _wrap(b, raw[k], x.shape[k]), shape)
        linear = (
            idx if linear is None else m.add(b, m.mul(b, linear, m.like(b, x.shape[k], idx)), idx)
        )
    assert linear is not None
    adjacent = axes == list(range(axes[0], axes[-1] + 1))
    first = axes[0] if adjacent else 0
    if not adjacent:  # numpy puts the index dims first when the indexed axes are apart
        x = b.permute(x, [*axes, *(k for k in range(x.ndim) if k not in axes)])
    merged = int(np.prod([x.shape[first + j] for j in range(len(axes))]))
    x = b.reshape(x, (*x.shape[:first], merged, *x.shape[first + len(axes) :]))
    return b.gather(x, linear, first)


def _gather(ctx: AtenContext) -> Value:
    """torch.gather (take_along_axis): a flat GATHER at computed linear positions."""
    b, x, index = ctx.b, ctx.tensor("self"), ctx.tensor("index")
    if x.ndim == 0:
        return x
    axis = int(ctx.arg("dim")) % x.ndim
    linear: Value | None = None
    for k in range(x.ndim):
        coord = _wrap(b, index, x.shape[k]) if k == axis else b.iota(index.shape, k)
        scaled = m.mul(b, coord, m.like(b, int(np.prod(x.shape[k + 1 :])), coord))
        linear = scaled if linear is None else m.add(b, linear, scaled)
    assert linear is not None
    return b.gather(b.reshape(x, (int(np.prod(x.shape)),)), linear, 0)


def _triangle(upper: bool) -> Lowering:
    return lambda ctx: s.triangle(ctx.b, ctx.tensor("self"), upper, int(ctx.arg("diagonal", 0)))


def _constant_pad(ctx: AtenContext) -> Value:
    x = ctx.tensor("self")
    pad = ctx.ints("pad")
    widths = [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):  # pairs run from the last axis backwards
        widths[x.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    spec = [
        (max(-lo, 0), 1, d - max(-lo, 0) - max(-hi, 0))
        for d, (lo, hi) in zip(x.shape, widths, strict=True)
    ]
    x = ctx.b.slice(x, spec)
    value = ctx.arg("value", 0)
    return ctx.b.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in widths], value)


def _flip(ctx: AtenContext) -> Value:
    x = ctx.tensor("self")
    flipped = {d % x.ndim for d in ctx.ints("dims")}
    spec = [(d - 1, -1, d) if k in flipped and d else (0, 1, d) for k, d in enumerate(x.shape)]
    return ctx.b.slice(x, spec)


def _repeat(ctx: AtenContext) -> Value:
    b, x = ctx.b, ctx.tensor("self")
    reps = ctx.ints("repeats")
    x = b.reshape(x, (1,) * (len(reps) - x.ndim) + x.shape)
    for axis, r in enumerate(reps):
        if r != 1:
            lead, rest = x.shape[:axis], x.shape[axis:]
            y = b.expand(b.reshape(x, (*lead, 1, *rest)), (*lead, r, *rest))
            x = b.reshape(y, (*lead, r * rest[0], *rest[1:]))
    return x


def _full(value_arg: str | None, fill: float | None = None) -> Lowering:
    """full / zeros / ones (and their _like / new_ forms): one scalar, expanded."""

    def lower(ctx: AtenContext) -> Value:
        value = fill if value_arg is None else ctx.args.get(value_arg)
        if isinstance(value, Value):
            return m.broadcast_to(ctx.b, ctx.b.cast(value, ctx.out_dtype), ctx.out_shape)
        return m.full(ctx.b, value, ctx.out_shape, ctx.out_dtype)

    return lower


def _arange(ctx: AtenContext) -> Value:
    start, step = ctx.arg("start", 0), ctx.arg("step", 1)
    values = torch.arange(start, ctx.arg("end"), step, dtype=IR_TO_TORCH[ctx.out_dtype])
    return ctx.b.const(_numpy(values))


def _numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _scatter(ctx: AtenContext) -> Value:
    b, x, index = ctx.b, ctx.tensor("self"), ctx.tensor("index")
    if ctx.args.get("reduce") is not None:
        raise ctx.unsupported("scatter with a reduction")
    axis = int(ctx.arg("dim")) % max(x.ndim, 1)
    src = ctx.args.get("src", ctx.args.get("value"))
    if isinstance(src, Value):
        src = b.slice(b.cast(src, x.dtype), [(0, 1, d) for d in index.shape])
    else:
        src = m.full(b, src, index.shape, x.dtype)
    return b.scatter(x, _wrap(b, index, x.shape[axis]), src, axis)


def _no_result(ctx: AtenContext) -> Result:
    """Runtime assertions that export inserts; static shapes make them moot."""
    return None


def _overloads(names: str, fn: Lowering) -> dict[str, Lowering]:
    return dict.fromkeys(names.split(), fn)


OPS: dict[str, Lowering] = {
    **_overloads(
        "aten.view.default aten._unsafe_view.default aten.reshape.default "
        "aten.view_copy.default aten._reshape_copy.default",
        _reshape,
    ),
    **_overloads("aten.permute.default aten.permute_copy.default", _permute),
    **_overloads("aten.t.default aten.transpose.int", _transpose),
    "aten.numpy_T.default": lambda ctx: ctx.b.permute(
        ctx.tensor("self"), list(range(ctx.tensor("self").ndim))[::-1]
    ),
    **_overloads("aten.expand.default aten.expand_copy.default", _expand),
    **_overloads("aten.unsqueeze.default aten.unsqueeze_copy.default", _unsqueeze),
    **_overloads("aten.squeeze.default aten.squeeze.dim aten.squeeze.dims", _squeeze),
    **_overloads("aten.slice.Tensor aten.slice_copy.Tensor", _slice),
    **_overloads("aten.select.int aten.select_copy.int", _select),
    "aten.cat.default": _cat,
    "aten.stack.default": _stack,
    **_overloads("aten.split.Tensor aten.split_with_sizes.default", _split),
    "aten.unbind.int": _unbind,
    "aten.embedding.default": _embedding,
    "aten.index_select.default": _index_select,
    "aten.index.Tensor": _index,
    "aten.gather.default": _gather,
    **_overloads("aten.scatter.src aten.scatter.value", _scatter),
    "aten.tril.default": _triangle(upper=False),
    "aten.triu.default": _triangle(upper=True),
    "aten.constant_pad_nd.default": _constant_pad,
    "aten.flip.default": _flip,
    "aten.repeat.default": _repeat,
    **_overloads(
        "aten.full.default aten.full_like.default aten.new_full.default", _full("fill_value")
    ),
    **_overloads(
        "aten.zeros.default aten.zeros_like.default aten.new_zeros.default "
        "aten.empty.memory_format aten.empty_like.default aten.new_empty.default "
        "aten.empty_strided.default",
        _full(None, 0),
    ),
    **_overloads("aten.ones.default aten.ones_like.default aten.new_ones.default", _full(None, 1)),
    "aten.scalar_tensor.default": _full("s"),
    **_overloads("aten.arange.default aten.arange.start aten.arange.start_step", _arange),
    **_overloads(
        "aten._assert_tensor_metadata.default aten._assert_scalar.default "
        "aten._assert_async.msg aten.sym_constrain_range_for_size.default",
        _no_result,
    ),
}
