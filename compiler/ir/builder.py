"""GraphBuilder: the one way graphs are made.  It infers each node's shape and dtype,
rejects malformed nodes at once, and folds operations whose operands are all constants.

Folding evaluates the op with the reference interpreter, so a folded graph means exactly
what the unfolded one did.

Provenance: inside `with builder.origin(names):` every compute or view node made (or
found again by sharing) records those source-model node names; `Graph.origins` keeps them
per node, so a kernel can say which ONNX nodes it came from (`luminal profile`).  An op whose result would be bigger than its constant operands
(a broadcast) is not folded, except small integer tensors (shape arithmetic): a broadcast
bias or a scalar stays a free view instead of becoming a large weight.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from luminal.compiler.ir import interpreter
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph, Node, Shape, numel
from luminal.compiler.ir.ops import ARITY, BINARY, COMPARE, REDUCE, UNARY, Op
from luminal.errors import GraphError

#: Integer constants up to this many elements may be created by folding regardless of growth.
FOLD_SMALL = 4096
#: A gather of constants (a table read at constant positions: T5's relative position bias,
#: 32 x 8 buckets read at 128 x 128 positions) is folded up to this many elements: each
#: run would write what it reads as a weight, and folded its consumers read it in their
#: own layout (the heads-first permute folded in) rather than through a transpose.
FOLD_GATHER = 1 << 18


@dataclass(frozen=True, slots=True)
class Value:
    """A handle to a node while building: its index, shape and dtype."""

    id: int
    shape: Shape
    dtype: DType

    @property
    def ndim(self) -> int:
        return len(self.shape)


class GraphBuilder:
    def __init__(self, fold: bool = True) -> None:
        self._nodes: list[Node] = []
        self._consts: dict[str, np.ndarray] = {}
        self._inputs: list[tuple[str, int]] = []
        self._fold = fold
        self._cache: dict[tuple[Any, ...], int] = {}
        self._origin: tuple[str, ...] = ()
        self._origins: dict[int, tuple[str, ...]] = {}

    @contextmanager
    def origin(self, names: Sequence[str]) -> Iterator[None]:
        """Nodes made inside the block come from the source nodes `names` (merged with
        what a shared node already came from)."""
        outer = self._origin
        self._origin = tuple(names)
        try:
            yield
        finally:
            self._origin = outer

    # ---- sources ---------------------------------------------------------------------
    def input(self, name: str, shape: Sequence[int], dtype: DType) -> Value:
        if any(n == name for n, _ in self._inputs):
            raise GraphError(f"duplicate graph input '{name}'")
        v = self._add(Node(Op.INPUT, (), tuple(int(d) for d in shape), dtype, name))
        self._inputs.append((name, v.id))
        return v

    def const(self, array: Any, dtype: DType | None = None, name: str | None = None) -> Value:
        arr = np.asarray(array)
        if dtype is not None:
            arr = arr.astype(dtype.np)
        dt = DType.from_numpy(arr.dtype)
        arr = (arr if arr.flags.c_contiguous else arr.copy(order="C")).view()
        arr.flags.writeable = False  # a read-only view: folding and passes never mutate
        key = name if name is not None and name not in self._consts else self._fresh_key()
        if arr.size <= 16 and name is None:  # share small constants (scalars, shapes)
            cache_key = ("const", dt, arr.shape, arr.tobytes())
            if cache_key in self._cache:
                return self.value(self._cache[cache_key])
            v = self._add(Node(Op.CONST, (), tuple(arr.shape), dt, key), cache=False)
            self._cache[cache_key] = v.id
        else:
            v = self._add(Node(Op.CONST, (), tuple(arr.shape), dt, key), cache=False)
        self._consts[key] = arr
        return v

    def iota(self, shape: Sequence[int], axis: int, dtype: DType = DType.I64) -> Value:
        shape = tuple(int(d) for d in shape)
        return self._emit(Op.IOTA, (), _axis(axis, len(shape)), shape, dtype)

    # ---- compute -----------------------------------------------------------------------
    def unary(self, op: Op, x: Value) -> Value:
        if op not in UNARY or op is Op.CAST:
            raise GraphError(f"{op.value} is not a unary math op")
        if not x.dtype.is_float:
            raise GraphError(f"{op.value} needs a float operand, got {x.dtype.value}")
        return self._emit(op, (x,), None, x.shape, x.dtype)

    def cast(self, x: Value, dtype: DType) -> Value:
        if x.dtype is dtype:
            return x
        return self._emit(Op.CAST, (x,), None, x.shape, dtype)

    def binary(self, op: Op, a: Value, b: Value) -> Value:
        if op not in BINARY:
            raise GraphError(f"{op.value} is not a binary op")
        if a.shape != b.shape:
            raise GraphError(f"{op.value} operands differ in shape: {a.shape} vs {b.shape}")
        if a.dtype is not b.dtype:
            raise GraphError(
                f"{op.value} operands differ in dtype: {a.dtype.value} vs {b.dtype.value}"
            )
        if op is Op.IDIV and not a.dtype.is_int:
            raise GraphError("idiv needs integer operands")
        out = DType.BOOL if op in COMPARE else a.dtype
        return self._emit(op, (a, b), None, a.shape, out)

    def where(self, cond: Value, a: Value, b: Value) -> Value:
        if cond.dtype is not DType.BOOL:
            raise GraphError(f"where condition must be bool, got {cond.dtype.value}")
        if not cond.shape == a.shape == b.shape:
            raise GraphError(f"where operands differ in shape: {cond.shape}, {a.shape}, {b.shape}")
        if a.dtype is not b.dtype:
            raise GraphError(f"where branches differ in dtype: {a.dtype.value} vs {b.dtype.value}")
        return self._emit(Op.WHERE, (cond, a, b), None, a.shape, a.dtype)

    def reduce(self, op: Op, x: Value, axes: Sequence[int]) -> Value:
        if op not in REDUCE:
            raise GraphError(f"{op.value} is not a reduction")
        norm = tuple(sorted({_axis(a, x.ndim) for a in axes}))
        if not norm:
            return x
        shape = tuple(1 if k in norm else d for k, d in enumerate(x.shape))
        return self._emit(op, (x,), norm, shape, x.dtype)

    def gather(self, data: Value, indices: Value, axis: int) -> Value:
        if not indices.dtype.is_int:
            raise GraphError(f"gather indices must be integers, got {indices.dtype.value}")
        ax = _axis(axis, data.ndim)
        shape = data.shape[:ax] + indices.shape + data.shape[ax + 1 :]
        return self._emit(Op.GATHER, (data, indices), ax, shape, data.dtype)

    def scatter(self, data: Value, indices: Value, updates: Value, axis: int) -> Value:
        if indices.shape != updates.shape or indices.ndim != data.ndim:
            raise GraphError(
                f"scatter shapes disagree: data {data.shape}, indices {indices.shape}, updates {updates.shape}"
            )
        if updates.dtype is not data.dtype or not indices.dtype.is_int:
            raise GraphError("scatter updates must match data dtype and indices be integers")
        return self._emit(
            Op.SCATTER, (data, indices, updates), _axis(axis, data.ndim), data.shape, data.dtype
        )

    # ---- views -------------------------------------------------------------------------
    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        shape = tuple(int(d) for d in shape)
        if numel(shape) != numel(x.shape) or any(d < 0 for d in shape):
            raise GraphError(f"cannot reshape {x.shape} to {shape}")
        if shape == x.shape:
            return x
        return self._emit(Op.RESHAPE, (x,), shape, shape, x.dtype)

    def permute(self, x: Value, perm: Sequence[int]) -> Value:
        perm = tuple(_axis(p, x.ndim) for p in perm)
        if sorted(perm) != list(range(x.ndim)):
            raise GraphError(f"{perm} is not a permutation of {x.ndim} axes")
        if perm == tuple(range(x.ndim)):
            return x
        return self._emit(Op.PERMUTE, (x,), perm, tuple(x.shape[p] for p in perm), x.dtype)

    def expand(self, x: Value, shape: Sequence[int]) -> Value:
        shape = tuple(int(d) for d in shape)
        if len(shape) != x.ndim or any(
            s != d and s != 1 for s, d in zip(x.shape, shape, strict=True)
        ):
            raise GraphError(f"cannot expand {x.shape} to {shape}")
        if shape == x.shape:
            return x
        return self._emit(Op.EXPAND, (x,), shape, shape, x.dtype)

    def pad(
        self, x: Value, widths: Sequence[tuple[int, int]], value: float | int | bool = 0
    ) -> Value:
        widths = tuple((int(a), int(b)) for a, b in widths)
        if len(widths) != x.ndim or any(a < 0 or b < 0 for a, b in widths):
            raise GraphError(f"bad pad widths {widths} for shape {x.shape}")
        if all(a == 0 and b == 0 for a, b in widths):
            return x
        shape = tuple(d + a + b for d, (a, b) in zip(x.shape, widths, strict=True))
        return self._emit(Op.PAD, (x,), (widths, _scalar(value, x.dtype)), shape, x.dtype)

    def slice(self, x: Value, spec: Sequence[tuple[int, int, int]]) -> Value:
        """spec: (start, step, length) per axis, with every index in range."""
        if len(spec) != x.ndim:
            raise GraphError(f"slice spec {spec} does not match rank {x.ndim}")
        arg, shape = [], []
        for (start, step, length), dim in zip(spec, x.shape, strict=True):
            if (
                step == 0
                or length < 0
                or (length and not (0 <= start < dim and 0 <= start + step * (length - 1) < dim))
            ):
                raise GraphError(
                    f"slice ({start}, step {step}, length {length}) out of range for dim {dim}"
                )
            arg.append((int(start) if length else 0, int(step)))
            shape.append(int(length))
        if tuple(shape) == x.shape and all(a == (0, 1) for a in arg):
            return x
        return self._emit(Op.SLICE, (x,), tuple(arg), tuple(shape), x.dtype)

    # ---- finishing ---------------------------------------------------------------------
    def value(self, index: int) -> Value:
        node = self._nodes[index]
        return Value(index, node.shape, node.dtype)

    def is_const(self, v: Value) -> bool:
        return self._nodes[v.id].op is Op.CONST

    def const_value(self, v: Value) -> np.ndarray | None:
        node = self._nodes[v.id]
        return self._consts[node.arg] if node.op is Op.CONST else None

    def build(self, outputs: Mapping[str, Value]) -> Graph:
        """Freeze into a Graph holding only what the outputs need (inputs are always kept)."""
        live = {i for _, i in self._inputs} | {v.id for v in outputs.values()}
        for i in range(len(self._nodes) - 1, -1, -1):
            if i in live:
                live.update(self._nodes[i].src)
        remap: dict[int, int] = {}
        nodes: list[Node] = []
        for i, node in enumerate(self._nodes):
            if i in live:
                remap[i] = len(nodes)
                nodes.append(
                    Node(
                        node.op, tuple(remap[s] for s in node.src), node.shape, node.dtype, node.arg
                    )
                )
        consts = {n.arg: self._consts[n.arg] for n in nodes if n.op is Op.CONST}
        return Graph(
            nodes=tuple(nodes),
            inputs=tuple((name, remap[i]) for name, i in self._inputs),
            outputs=tuple((name, remap[v.id]) for name, v in outputs.items()),
            consts=consts,
            origins={remap[i]: names for i, names in self._origins.items() if i in remap},
        )

    # ---- internals ---------------------------------------------------------------------
    def _emit(self, op: Op, srcs: tuple[Value, ...], arg: Any, shape: Shape, dtype: DType) -> Value:
        assert len(srcs) == ARITY[op], op
        if self._fold and op is not Op.IOTA and srcs:
            folded = [self._constant_view(s) for s in srcs]
            if all(f is not None for f in folded):
                # Fold when the result is no bigger than the constants behind the operands
                # (a broadcast scalar counts as one element); small integer tensors (shape
                # arithmetic) may grow.  A broadcast float constant stays a free view.
                biggest = max(base for _, base in folded)  # type: ignore[misc]
                small = FOLD_GATHER if op is Op.GATHER else 0 if dtype.is_float else FOLD_SMALL
                if numel(shape) <= max(biggest, small):
                    arrays = [a for a, _ in folded]  # type: ignore[misc]
                    return self.const(interpreter.eval_op(op, arg, shape, dtype, arrays))
        return self._add(Node(op, tuple(s.id for s in srcs), shape, dtype, arg))

    def _constant_view(self, v: Value) -> tuple[np.ndarray, int] | None:
        """The value of a constant, or of a reshape/expand of one (as a numpy view), with
        the element count of the constant behind it; None for anything computed."""
        node = self._nodes[v.id]
        if node.op is Op.CONST:
            array = self._consts[node.arg]
            return array, int(array.size)
        if node.op in (Op.RESHAPE, Op.EXPAND):
            inner = self._constant_view(self.value(node.src[0]))
            if inner is not None:
                value = interpreter.eval_op(node.op, node.arg, node.shape, node.dtype, [inner[0]])
                return value, inner[1]
        return None

    def _fresh_key(self) -> str:
        """An unused constant name (a replayed graph's own `constN` names may be taken)."""
        n = len(self._consts)
        while f"const{n}" in self._consts:
            n += 1
        return f"const{n}"

    def _add(self, node: Node, cache: bool = True) -> Value:
        key = (node.op, node.src, node.shape, node.dtype, node.arg)
        if cache and node.op not in (Op.INPUT,):
            hit = self._cache.get(key)
            if hit is not None:
                self._note_origin(hit)
                return self.value(hit)
        self._nodes.append(node)
        index = len(self._nodes) - 1
        if cache:
            self._cache[key] = index
        self._note_origin(index)
        return Value(index, node.shape, node.dtype)

    def _note_origin(self, index: int) -> None:
        if not self._origin or self._nodes[index].op in (Op.INPUT, Op.CONST):
            return
        had = self._origins.get(index, ())
        self._origins[index] = (*had, *(n for n in self._origin if n not in had))


def _axis(axis: int, ndim: int) -> int:
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise GraphError(f"axis {axis} out of range for rank {ndim}")
    return axis % max(ndim, 1)


def _scalar(value: float | int | bool, dtype: DType) -> float | int | bool:
    if dtype is DType.BOOL:
        return bool(value)
    if dtype.is_int:
        return int(value)
    return float(value)
