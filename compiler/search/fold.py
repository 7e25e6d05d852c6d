"""Compile-time evaluation of subterms built only from constants.

A rewrite that moves a scale onto a weight, or BatchNorm into a convolution, leaves a
term such as `Mul(Expand(W), Expand(Reshape(gamma)))` whose operands are all constants.  The
decoder evaluates it here, with the reference interpreter's op definitions (so the folded
value means exactly what the term did), and emits one weight plus a free broadcasting view.

Values are kept *compressed*: `Folded.small` has the term's rank, with size 1 on every axis
along which the value does not change, so a broadcast scale costs one element per channel
and never the full broadcast shape.  Anything that would need more than `LIMIT` elements at
once, or would make a weight more than twice the size of its largest operand, is not folded
(`NotFoldable`) and stays an op in the graph.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from luminal.compiler.ir import interpreter
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import numel
from luminal.compiler.ir.ops import ELEMENTWISE, Op
from luminal.compiler.search.language import Kind, Term

#: Most elements materialized while folding one op.
LIMIT = 1 << 22
#: A folded weight may be this many times its largest operand (concatenation doubles).
GROWTH = 2
#: ... and up to this many elements regardless.
SMALL = 4096
#: Ops evaluated on the whole value (they move or pick elements), within `LIMIT`.
_DENSE = frozenset({Term.PAD, Term.SLICE, Term.GATHER, Term.SCATTER})
_GENERATED = re.compile(r"const\d+")


class NotFoldable(Exception):
    """The subterm is left as ops: too big to evaluate, or it would bloat the weights."""


@dataclass(frozen=True)
class Folded:
    """A constant tensor of `shape` whose values are `small` broadcast (same rank)."""

    small: np.ndarray
    shape: tuple[int, ...]
    name: str | None = None  # the original constant's key, while unchanged

    def full(self) -> np.ndarray:
        return np.broadcast_to(self.small, self.shape)


def compress(array: np.ndarray) -> np.ndarray:
    """Shrink to size 1 every axis along which `array` is constant."""
    out = array
    for axis in range(array.ndim):
        if out.shape[axis] <= 1:
            continue
        first = np.take(out, [0], axis=axis)
        second = np.take(out, [1], axis=axis)
        if not _same(first, second):
            continue
        if _same(out, first):
            out = first
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind == "f":
        return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    return bool(np.all(a == b))


def leaf(array: np.ndarray, key: str) -> Folded:
    """A constant leaf; an unchanged weight keeps its name, unless the name is one that
    GraphBuilder generates (`const<n>`), which a later generated name could collide with."""
    small = compress(array)
    keep = small is array and not _GENERATED.fullmatch(key)
    return Folded(small, tuple(array.shape), key if keep else None)


def fold_node(
    op: Term, params: Sequence[object], kids: Sequence[Folded], shape: tuple[int, ...], dt: DType
) -> Folded:
    """Evaluate one op over folded operands; `shape` and `dt` are the e-class's type."""
    biggest = max(k.small.size for k in kids)
    if op.op in ELEMENTWISE:
        common = np.broadcast_shapes(*(k.small.shape for k in kids))
        srcs = [np.broadcast_to(k.small, common) for k in kids]
        out = interpreter.eval_op(op.op, None, tuple(common), dt, srcs)  # type: ignore[arg-type]
        result = Folded(out, shape)
    elif op is Term.EXPAND:
        result = Folded(kids[0].small, shape)
    elif op is Term.PERMUTE:
        (perm,) = params
        result = Folded(np.transpose(kids[0].small, perm), shape)  # type: ignore[arg-type]
    elif op is Term.RESHAPE:
        (x,) = kids
        if x.small.shape == x.shape:
            result = Folded(x.small.reshape(shape), shape)
        else:
            result = Folded(compress(_dense(x).reshape(shape)), shape)
    elif op.kind is Kind.REDUCE:
        result = _reduce(op, params[0], kids[0], shape, dt)  # type: ignore[arg-type]
    elif op is Term.CONCAT:
        (axis,) = params
        _budget(shape)
        out = np.concatenate([_dense(k) for k in kids], axis=axis)  # type: ignore[arg-type]
        result = Folded(compress(out), shape)
    elif op in _DENSE:
        _budget(shape)
        arg = params[0] if params else None
        if op is Term.SLICE:
            arg = arg[0]  # type: ignore[index]
        srcs = [_dense(k) for k in kids]
        out = interpreter.eval_op(op.op, arg, shape, dt, srcs)  # type: ignore[arg-type]
        result = Folded(compress(out), shape)
    else:
        raise NotFoldable(op.egg_name)
    if result.small.size > max(SMALL, GROWTH * biggest):
        raise NotFoldable(f"{op.egg_name} would grow a weight to {result.small.size} elements")
    return result


def _reduce(
    op: Term, axes: tuple[int, ...], x: Folded, shape: tuple[int, ...], dt: DType
) -> Folded:
    """Reduce the compressed value: over a broadcast axis a sum multiplies by its length
    and a max changes nothing, so only the stored axes are reduced."""
    stored = tuple(a for a in axes if x.small.shape[a] > 1)
    small_shape = tuple(1 if k in stored else n for k, n in enumerate(x.small.shape))
    reduce_op: Op = op.op  # type: ignore[assignment]
    out = interpreter.eval_op(reduce_op, stored, small_shape, dt, [x.small]) if stored else x.small
    copies = math.prod(x.shape[a] for a in axes if x.small.shape[a] == 1)
    if op is Term.SUM and copies > 1:
        out = interpreter.eval_op(
            Op.MUL, None, small_shape, dt, [out, np.full(small_shape, copies, dt.np)]
        )
    return Folded(out, shape)


def _dense(x: Folded) -> np.ndarray:
    _budget(x.shape)
    return np.require(x.full(), requirements="C")


def _budget(shape: tuple[int, ...]) -> None:
    if numel(shape) > LIMIT:
        raise NotFoldable(f"{numel(shape)} elements")
