"""Running a size-n input in code compiled for size B >= n, exactly: padding and masks.

A profile's specialization is a static graph at a bucket size B of each symbolic dim.  An
input of size n <= B is zero-padded to B, run, and its outputs sliced back to n.  That is
exact when no valid output element depends on a padded one, which `pad_graph` proves on
the IR and makes so:

- Every axis of every node carries `Tag`s: the symbolic dims whose padded positions it
  holds and where each sits in the axis (index = (o*B + b)*inner + i; padded iff b >= n).
  Elementwise ops, views and gathers carry them along; a reshape may merge a dim with
  others (batch x sequence) but never split it.
- A reduction over a tagged axis reads its identity (0 for a sum, -inf for a max) at
  padded positions: `WHERE(valid, x, identity)`.  For a sum of products (a contraction:
  matmul, attention's P.V) the mask goes on the product's operands, before their
  broadcasts, so the contraction stays one kernel; both operands are masked, so a
  non-finite value at a padded position cannot leak in as 0 x inf.
- A mean over a tagged axis (a sum times the constant 1/count) divides by the valid count.
- What would move a padded position onto a valid one is refused, naming the node: a
  gather, scatter, slice or pad along a tagged axis (e.g. "the last token", a convolution
  over a padded axis), or a reshape that splits a dim.

A constant that spans a tagged axis (position ids, a causal mask) is taken as the same
on the valid positions as it would be at size n, which holds for what exporters build
from a shape (ranges, triangular masks); the profile compile checks it on the reference
interpreter at a padded size against the model loaded at that size (`shapes/build.py`).

The valid size of each dim is a graph input named `length_input(dim)` (i64, shape (1,)).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import DType, Graph, GraphBuilder, Op, Value
from luminal.compiler.ir.ops import BINARY, REDUCE, UNARY
from luminal.compiler.ir.spec import replay
from luminal.errors import UnsupportedOp

#: Graph inputs holding the valid size of each padded dim start with this.
LENGTH_PREFIX = "luminal.len."


def length_input(dim: str) -> str:
    return LENGTH_PREFIX + dim


@dataclass(frozen=True, order=True)
class Tag:
    """Dim `dim`, compiled at `size`, sits in an axis at stride `inner`."""

    dim: str
    size: int
    inner: int


AxisTags = tuple[Tag, ...]
NodeTags = tuple[AxisTags, ...]


@dataclass(frozen=True)
class PaddedGraph:
    graph: Graph  # the masked graph, with one length input per padded dim
    dims: tuple[str, ...]  # the padded dims, in the order of their length inputs
    outputs: Mapping[str, NodeTags]  # where each output holds padded positions
    masks: int  # reductions that read through a mask


def pad_graph(graph: Graph, axes: Mapping[str, Mapping[int, str]]) -> PaddedGraph:
    """The masked graph for inputs padded along `axes` (input name -> axis -> dim).

    Dims whose compiled size is 1 need no padding (only size 1 runs there) and are left
    out.  Raises UnsupportedOp naming the first node that mixes padded positions in."""
    return _Padder(graph, axes).run()


def pad_feeds(
    feeds: Mapping[str, np.ndarray],
    axes: Mapping[str, Mapping[int, str]],
    point: Mapping[str, int],
    padded: Sequence[str],
    sizes: Mapping[str, int],
) -> dict[str, np.ndarray]:
    """Inputs at `sizes` zero-padded to the bucket `point`, with the length inputs of the
    dims in `padded` (the ones the point's graph masks)."""
    out = {}
    for name, array in feeds.items():
        widths = [(0, 0)] * array.ndim
        for k, dim in axes.get(name, {}).items():
            widths[k] = (0, point[dim] - array.shape[k])
        grow = any(w for _, w in widths)
        out[name] = np.pad(array, widths) if grow else array
    for dim in padded:
        out[length_input(dim)] = np.array([sizes[dim]], dtype=np.int64)
    return out


def unpad(array: np.ndarray, tags: NodeTags, sizes: Mapping[str, int]) -> np.ndarray:
    """An output's valid part: every tagged axis cut back to the dims' sizes."""
    for k, axis in enumerate(tags):
        # outermost tag first: cutting it does not move the ones inside it
        for tag in sorted(axis, key=lambda t: -t.inner):
            n = sizes[tag.dim]
            if n == tag.size:
                continue
            length = array.shape[k]
            outer = length // (tag.size * tag.inner)
            shaped = array.reshape(
                *array.shape[:k], outer, tag.size, tag.inner, *array.shape[k + 1 :]
            )
            cut = shaped[(slice(None),) * (k + 1) + (slice(0, n),)]
            array = cut.reshape(*array.shape[:k], outer * n * tag.inner, *array.shape[k + 1 :])
    return np.ascontiguousarray(array)


class _Padder:
    def __init__(self, graph: Graph, axes: Mapping[str, Mapping[int, str]]) -> None:
        self.graph = graph
        self.axes = axes
        self.b = GraphBuilder()
        self.tags: list[NodeTags] = []
        self.new: list[Value] = []
        self.lengths: dict[str, Value] = {}
        self.masked: dict[tuple[int, frozenset[str], bool], Value] = {}
        self.masks = 0

    def run(self) -> PaddedGraph:
        g = self.graph
        names = [n for n, _ in g.inputs]
        for name in self.axes:
            if name not in names:
                raise UnsupportedOp(f"the profile names input '{name}', which the model lacks")
        for i in range(len(g.nodes)):
            self.tags.append(self._tags(i))
            with self.b.origin(g.origins.get(i, ())):
                self.new.append(self._emit(i))
        dims = tuple(sorted(self.lengths))
        outputs = {name: self.tags[i] for name, i in g.outputs}
        built = self.b.build({name: self.new[i] for name, i in g.outputs})
        return PaddedGraph(built, dims, outputs, self.masks)

    # ---- where padded positions are ------------------------------------------------
    def _refuse(self, i: int, what: str) -> UnsupportedOp:
        origin = self.graph.origins.get(i, ())
        where = f"node '{origin[0]}'" if origin else f"IR node %{i}"
        return UnsupportedOp(
            f"{where} {what}, so a smaller size cannot run padded to a compiled one; "
            "profile another dim or fix this one with --shapes"
        )

    def _tags(self, i: int) -> NodeTags:
        node = self.graph.nodes[i]
        op, arg = node.op, node.arg
        src = [self.tags[s] for s in node.src]
        if op is Op.INPUT:
            tagged = self.axes.get(arg, {})
            out = []
            for k, d in enumerate(node.shape):
                dim = tagged.get(k)
                out.append((Tag(dim, d, 1),) if dim is not None and d > 1 else ())
            return tuple(out)
        if op in (Op.CONST, Op.IOTA):
            return tuple(() for _ in node.shape)
        if op in UNARY:
            return src[0]
        if op in BINARY or op is Op.WHERE:
            return self._merge(i, src)
        if op in REDUCE:
            return tuple(() if k in arg else t for k, t in enumerate(src[0]))
        if op is Op.GATHER:
            data, index = src
            if data[arg]:
                raise self._refuse(i, f"gathers along an axis that holds dim '{data[arg][0].dim}'")
            return data[:arg] + index + data[arg + 1 :]
        if op is Op.SCATTER:
            merged = self._merge(i, src)
            if merged[arg]:
                raise self._refuse(
                    i, f"scatters along an axis that holds dim '{merged[arg][0].dim}'"
                )
            return merged
        if op is Op.PERMUTE:
            return tuple(src[0][p] for p in arg)
        if op is Op.EXPAND:
            return src[0]
        if op is Op.RESHAPE:
            return self._reshape(i, src[0])
        if op is Op.PAD:
            widths, _ = arg
            for k, (w, t) in enumerate(zip(widths, src[0], strict=True)):
                if t and w != (0, 0):
                    raise self._refuse(i, f"pads axis {k}, which holds dim '{t[0].dim}'")
            return src[0]
        if op is Op.SLICE:
            x = self.graph.nodes[node.src[0]]
            for k, ((start, step), t) in enumerate(zip(arg, src[0], strict=True)):
                if t and (start, step, node.shape[k]) != (0, 1, x.shape[k]):
                    raise self._refuse(i, f"slices axis {k}, which holds dim '{t[0].dim}'")
            return src[0]
        raise self._refuse(i, f"is a {op.value}, which padding does not know")

    def _merge(self, i: int, src: Sequence[NodeTags]) -> NodeTags:
        """Tags of an elementwise result: each axis's tags from whichever operand has
        them (operands that span the axis without them are constants: see the module
        docstring); operands placing one dim differently are refused."""
        rank = max(len(t) for t in src)
        out = []
        for k in range(rank):
            found: dict[str, Tag] = {}
            for tags in src:
                for tag in tags[k] if k < len(tags) else ():
                    if found.setdefault(tag.dim, tag) != tag:
                        raise self._refuse(i, f"combines dim '{tag.dim}' laid out two ways")
            out.append(tuple(sorted(found.values())))
        return tuple(out)

    def _reshape(self, i: int, src: NodeTags) -> NodeTags:
        node = self.graph.nodes[i]
        old = self.graph.nodes[node.src[0]].shape
        new = node.shape
        old_strides = _strides(old)
        new_strides = _strides(new)
        out: list[list[Tag]] = [[] for _ in new]
        for k, axis in enumerate(src):
            for tag in axis:
                lo = old_strides[k] * tag.inner
                hi = lo * tag.size
                for j, (d, s) in enumerate(zip(new, new_strides, strict=True)):
                    if d > 1 and s <= lo and hi <= s * d and lo % s == 0 and (s * d) % hi == 0:
                        out[j].append(Tag(tag.dim, tag.size, lo // s))
                        break
                else:
                    raise self._refuse(
                        i, f"reshapes {old} to {new}, splitting dim '{tag.dim}' across axes"
                    )
        return tuple(tuple(sorted(t)) for t in out)

    # ---- the masked graph ------------------------------------------------------------
    def _emit(self, i: int) -> Value:
        node = self.graph.nodes[i]
        srcs = [self.new[s] for s in node.src]
        if node.op is Op.INPUT:
            value = replay(self.b, self.graph, node, srcs)
            for axis in self.tags[i]:
                for tag in axis:
                    self._length(tag.dim)
            return value
        if node.op in REDUCE:
            dims = frozenset(t.dim for k in node.arg for t in self.tags[node.src[0]][k])
            if dims:
                self.masks += 1
                x = self._mask(node.src[0], dims, node.op is Op.SUM)
                return self.b.reduce(node.op, x, node.arg)
        if node.op is Op.MUL:
            mean = self._mean(i)
            if mean is not None:
                return mean
        return replay(self.b, self.graph, node, srcs)

    def _length(self, dim: str) -> Value:
        if dim not in self.lengths:
            self.lengths[dim] = self.b.input(length_input(dim), (1,), DType.I64)
        return self.lengths[dim]

    def _mask(self, i: int, dims: frozenset[str], zero: bool) -> Value:
        """Node i's new value with its positions padded in `dims` set to the identity of
        a sum (`zero`) or of a max, masked as far up a product and its views as it goes."""
        if not any(t.dim in dims for axis in self.tags[i] for t in axis):
            return self.new[i]
        key = (i, dims, zero)
        if key in self.masked:
            return self.masked[key]
        node = self.graph.nodes[i]
        if (zero and node.op is Op.MUL) or node.op in (Op.EXPAND, Op.RESHAPE, Op.PERMUTE):
            srcs = [self._mask(s, dims, zero) for s in node.src]
            value = replay(self.b, self.graph, node, srcs)
        else:
            value = self.b.where(self._valid(i, dims), self.new[i], self._identity(i, zero))
        self.masked[key] = value
        return value

    def _valid(self, i: int, dims: frozenset[str]) -> Value:
        node = self.graph.nodes[i]
        b, shape = self.b, node.shape
        cond: Value | None = None
        for k, axis in enumerate(self.tags[i]):
            for tag in axis:
                if tag.dim not in dims:
                    continue
                index = b.iota(shape, k, DType.I64)
                if tag.inner > 1:
                    index = b.binary(Op.IDIV, index, m.full(b, tag.inner, shape, DType.I64))
                if shape[k] > tag.size * tag.inner:
                    index = b.binary(Op.MOD, index, m.full(b, tag.size, shape, DType.I64))
                n = m.broadcast_to(b, self._length(tag.dim), shape)
                inside = b.binary(Op.CMPLT, index, n)
                cond = inside if cond is None else b.where(cond, inside, cond)
        assert cond is not None
        return cond

    def _identity(self, i: int, zero: bool) -> Value:
        node = self.graph.nodes[i]
        dt = node.dtype
        if zero:
            value: float | int | bool = False if dt is DType.BOOL else 0
        elif dt.is_float:
            value = -np.inf
        elif dt is DType.BOOL:
            value = False
        else:
            value = int(np.iinfo(dt.np).min)
        return m.full(self.b, value, node.shape, dt)

    def _mean(self, i: int) -> Value | None:
        """A sum over padded axes times 1/(its static count): divide by the valid count."""
        node = self.graph.nodes[i]
        for side in (0, 1):
            total, scale = node.src[side], node.src[1 - side]
            c = _constant_scalar(self.graph, scale)
            reduced = _through_reshapes(self.graph, total)
            if c is None or self.graph.nodes[reduced].op is not Op.SUM:
                continue
            rnode = self.graph.nodes[reduced]
            x = self.graph.nodes[rnode.src[0]]
            count = math.prod(x.shape[k] for k in rnode.arg)
            tags = [t for k in rnode.arg for t in self.tags[rnode.src[0]][k]]
            if not tags or not node.dtype.is_float or not np.isclose(c * count, 1.0, rtol=1e-5):
                continue
            b = self.b
            factor = m.full(b, c * math.prod(t.size for t in tags), node.shape, node.dtype)
            for t in tags:
                n = b.unary(Op.RECIP, b.cast(self._length(t.dim), node.dtype))
                factor = b.binary(Op.MUL, factor, m.broadcast_to(b, n, node.shape))
            return b.binary(Op.MUL, self.new[total], factor)
        return None


def _strides(shape: Sequence[int]) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


def _through_reshapes(graph: Graph, i: int) -> int:
    while graph.nodes[i].op is Op.RESHAPE:
        i = graph.nodes[i].src[0]
    return i


def _constant_scalar(graph: Graph, i: int) -> float | None:
    """The one value of a constant broadcast by views, or None."""
    while graph.nodes[i].op in (Op.RESHAPE, Op.EXPAND):
        i = graph.nodes[i].src[0]
    node = graph.nodes[i]
    if node.op is not Op.CONST:
        return None
    array = graph.consts[node.arg]
    if array.size != 1 or not np.issubdtype(array.dtype, np.floating):
        return None
    return float(array.reshape(()))
