"""Reference interpreter: the living definition of every IR op, in numpy.

It is the oracle for tests and for checking compiled candidates, so it favours being
obviously right over being fast.  One concession to speed keeps the model suite
testable: a SUM whose only operand is a MUL used nowhere else is evaluated as one
`np.einsum` over the operands' un-broadcast data, instead of materialising the product
of two expanded views (the shape a matmul or convolution decomposes into).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from luminal.compiler.ir.dtypes import DType, is_float_dtype
from luminal.compiler.ir.graph import Graph, Shape, check_feeds
from luminal.compiler.ir.ops import Op
from luminal.errors import UsageError


def run(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate `graph` on `inputs` (name -> array); returns name -> array."""
    values: list[np.ndarray | None] = [None] * len(graph.nodes)
    specs = graph.input_specs()
    feeds = dict(zip((s.name for s in specs), check_feeds(specs, inputs), strict=True))
    uses = graph.use_counts()
    fused = _fused_contractions(graph, uses)
    remaining = list(uses)
    for i, node in enumerate(graph.nodes):
        if i in fused.values():
            continue  # evaluated inside the SUM that consumes it
        if node.op is Op.INPUT:
            values[i] = feeds[node.arg]
        elif node.op is Op.CONST:
            values[i] = graph.consts[node.arg]
        elif i in fused:
            mul = graph.nodes[fused[i]]
            a, b = (values[s] for s in mul.src)
            values[i] = _sum_of_product(a, b, node.arg, node.dtype)
            _release(values, remaining, mul.src)
        else:
            srcs = [values[s] for s in node.src]
            values[i] = eval_op(node.op, node.arg, node.shape, node.dtype, srcs)
            _release(values, remaining, node.src)
    return {name: np.array(values[i], order="C") for name, i in graph.outputs}


def eval_op(op: Op, arg: Any, shape: Shape, dtype: DType, srcs: Sequence[np.ndarray]) -> np.ndarray:
    """Evaluate one op.  `shape` and `dtype` are the node's declared result type."""
    out = _EVAL[op](arg, shape, dtype, *srcs)
    if out.shape != shape:
        raise AssertionError(f"{op.value} produced shape {out.shape}, declared {shape}")
    return out if out.dtype == dtype.np else out.astype(dtype.np)


def _release(values: list[np.ndarray | None], remaining: list[int], srcs: Sequence[int]) -> None:
    for s in srcs:
        remaining[s] -= 1
        if remaining[s] == 0:
            values[s] = None


def _fused_contractions(graph: Graph, uses: list[int]) -> dict[int, int]:
    """SUM node index -> index of the single-use MUL it reduces."""
    fused = {}
    for i, node in enumerate(graph.nodes):
        if node.op is Op.SUM:
            (s,) = node.src
            mul = graph.nodes[s]
            if mul.op is Op.MUL and uses[s] == 1 and mul.dtype.is_float:
                fused[i] = s
    return fused


def _compact(x: np.ndarray, letters: str) -> tuple[np.ndarray, str]:
    """Drop broadcast (stride-0) axes so einsum sees only the real data."""
    index: list[Any] = []
    kept = []
    for axis, (size, stride) in enumerate(zip(x.shape, x.strides, strict=True)):
        if size > 1 and stride == 0:
            index.append(0)
        else:
            index.append(slice(None))
            kept.append(letters[axis])
    return x[tuple(index)], "".join(kept)


def _sum_of_product(
    a: np.ndarray, b: np.ndarray, axes: tuple[int, ...], dtype: DType
) -> np.ndarray:
    letters = string.ascii_letters[: a.ndim]
    ca, la = _compact(a, letters)
    cb, lb = _compact(b, letters)
    kept = [k for k in range(a.ndim) if k not in axes]
    # einsum cannot name an output letter that no operand has: add those axes back after.
    present = "".join(letters[k] for k in kept if letters[k] in la + lb)
    acc = np.float32 if dtype in (DType.F16, DType.BF16) else dtype.np
    res = np.einsum(f"{la},{lb}->{present}", ca.astype(acc), cb.astype(acc), optimize=True)
    # A reduced axis broadcast in both operands sums the same product `size` times.
    for k in axes:
        if letters[k] not in la + lb:
            res = res * np.asarray(a.shape[k], dtype=acc)
    res = np.asarray(res).reshape([a.shape[k] if letters[k] in present else 1 for k in kept])
    res = np.broadcast_to(res, [a.shape[k] for k in kept])
    return np.array(
        res.reshape([1 if k in axes else a.shape[k] for k in range(a.ndim)]), dtype=dtype.np
    )


# ---- the ops -------------------------------------------------------------------------


def _float_op(fn):  # type: ignore[no-untyped-def]
    def run(arg: Any, shape: Shape, dtype: DType, x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            if dtype in (DType.F16, DType.BF16):
                return fn(x.astype(np.float32)).astype(dtype.np)
            return fn(x)

    return run


def _cast(arg: Any, shape: Shape, dtype: DType, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if dtype is DType.BOOL:
            return x != 0
        return x.astype(dtype.np)


def _binary(fn):  # type: ignore[no-untyped-def]
    def run(arg: Any, shape: Shape, dtype: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, b))

    return run


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.logical_or(a, b) if a.dtype == np.bool_ else a + b


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.logical_and(a, b) if a.dtype == np.bool_ else a * b


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if is_float_dtype(a.dtype):
        return np.fmod(a, b)
    # C remainder: sign of the dividend.  Division by zero yields 0 (defined, never a trap).
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, a - b * _trunc_div(a, safe)).astype(a.dtype)


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _idiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, _trunc_div(a, safe)).astype(a.dtype)


def _iota(arg: int, shape: Shape, dtype: DType) -> np.ndarray:
    line = np.arange(shape[arg], dtype=np.int64).astype(dtype.np)
    view = [1] * len(shape)
    view[arg] = shape[arg]
    return np.broadcast_to(line.reshape(view), shape)


def _where(
    arg: Any, shape: Shape, dtype: DType, c: np.ndarray, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    return np.where(c, a, b)


def _reduce(fn):  # type: ignore[no-untyped-def]
    def run(arg: tuple[int, ...], shape: Shape, dtype: DType, x: np.ndarray) -> np.ndarray:
        if dtype in (DType.F16, DType.BF16) and fn is np.sum:
            return fn(x.astype(np.float32), axis=arg, keepdims=True).astype(dtype.np)
        if dtype is DType.BOOL:
            return (np.any if fn is np.sum else np.max)(x, axis=arg, keepdims=True)
        return fn(x, axis=arg, keepdims=True)

    return run


def _gather(axis: int, shape: Shape, dtype: DType, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    bad = (idx < 0) | (idx >= data.shape[axis])
    if np.any(bad):
        raise UsageError(
            f"gather index {int(idx[bad].flat[0])} out of range [0, {data.shape[axis]}) on axis {axis}"
        )
    return np.take(data, idx, axis=axis)


def _scatter(
    axis: int, shape: Shape, dtype: DType, data: np.ndarray, idx: np.ndarray, upd: np.ndarray
) -> np.ndarray:
    bad = (idx < 0) | (idx >= data.shape[axis])
    if np.any(bad):
        raise UsageError(
            f"scatter index {int(idx[bad].flat[0])} out of range [0, {data.shape[axis]}) on axis {axis}"
        )
    out = data.copy()
    # ScatterElements lets indices be shorter than data off the axis: write that corner.
    corner = tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(idx.shape))
    np.put_along_axis(out[corner], idx, upd, axis=axis)
    return out


def _reshape(arg: Shape, shape: Shape, dtype: DType, x: np.ndarray) -> np.ndarray:
    return x.reshape(arg)


def _permute(arg: tuple[int, ...], shape: Shape, dtype: DType, x: np.ndarray) -> np.ndarray:
    return x.transpose(arg)


def _expand(arg: Shape, shape: Shape, dtype: DType, x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(x, arg)


def _pad(
    arg: tuple[tuple[tuple[int, int], ...], Any], shape: Shape, dtype: DType, x: np.ndarray
) -> np.ndarray:
    widths, value = arg
    return np.pad(x, widths, mode="constant", constant_values=np.array(value).astype(x.dtype))


def _slice(
    arg: tuple[tuple[int, int], ...], shape: Shape, dtype: DType, x: np.ndarray
) -> np.ndarray:
    index = []
    for (start, step), length in zip(arg, shape, strict=True):
        stop: int | None = start + step * length
        if stop is not None and stop < 0:
            stop = None
        index.append(slice(start, stop, step))
    return x[tuple(index)]


_EVAL: dict[Op, Any] = {
    Op.IOTA: _iota,
    Op.EXP2: _float_op(np.exp2),
    Op.LOG2: _float_op(np.log2),
    Op.SIN: _float_op(np.sin),
    Op.SQRT: _float_op(np.sqrt),
    Op.RECIP: _float_op(np.reciprocal),
    Op.CAST: _cast,
    Op.ADD: _binary(_add),
    Op.MUL: _binary(_mul),
    Op.MAX: _binary(np.maximum),
    Op.MOD: _binary(_mod),
    Op.IDIV: _binary(_idiv),
    Op.CMPLT: _binary(np.less),
    Op.CMPEQ: _binary(np.equal),
    Op.WHERE: _where,
    Op.SUM: _reduce(np.sum),
    Op.RMAX: _reduce(np.max),
    Op.GATHER: _gather,
    Op.SCATTER: _scatter,
    Op.RESHAPE: _reshape,
    Op.PERMUTE: _permute,
    Op.EXPAND: _expand,
    Op.PAD: _pad,
    Op.SLICE: _slice,
}
