"""Values at a block of points: the Triton counterpart of the CPU backend's loop body.

A kernel computes one materialized node; everything between it and the buffers it reads
is inlined here.  Where the C code computes one element per loop iteration, these
statements compute a whole block at once: each index variable names a Triton tensor (a
flat block index `o`, or a broadcast such as `m[:, None]`), so the same view arithmetic
(`schedule.indexing`) yields vectors of offsets, and every value is a tensor.

Block lanes past the end of a kernel's extent are clamped onto its last element before
any index is formed, so every load is in bounds without a mask and only the final store
is masked; a gather index out of range sets the kernel's error flag and reads element 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from luminal.compiler.backends.triton import texpr
from luminal.compiler.ir import Graph, Op
from luminal.compiler.ir.ops import BINARY, UNARY, VIEW
from luminal.compiler.schedule import Schedule
from luminal.compiler.schedule.indexing import Index, row_major, view_source
from luminal.compiler.schedule.symbolic import Dyn, Lin


class Writer(Protocol):
    """What a body needs from the kernel it is written into."""

    g: Graph
    s: Schedule
    idx_type: str  # "tl.int32", or "tl.int64" when a buffer is too large for it
    uses_err: bool

    def pointer(self, i: int) -> str: ...

    def fresh(self, prefix: str = "v") -> str: ...


class Body:
    """Statements computing values at one block of points, memoized by (node, index)."""

    def __init__(self, w: Writer, names: Mapping[str, str], given: dict[int, str] | None = None):
        self.w = w
        self.names = names  # index variable -> the tensor (expression) holding it
        self.lines: list[str] = []
        self.memo: dict[tuple[int, Index], str] = {}
        self.given = given or {}  # node -> expression already holding its value here

    def emit(self, code: str) -> str:
        name = self.w.fresh()
        self.lines.append(f"{name} = {code}")
        return name

    def index(self, lin: Lin) -> str:
        """An index as a tensor (a constant index becomes a 0-d tensor)."""
        if not lin.terms:
            return f"tl.full([], {lin.const}, {self.w.idx_type})"
        return texpr.index(lin, self.names)

    def load(self, i: int, idx: Index) -> str:
        flat = row_major(idx, self.w.g.nodes[i].shape)
        return self.emit(f"tl.load({self.w.pointer(i)} + ({texpr.index(flat, self.names)}))")

    def value(self, i: int, idx: Index, top: bool = False) -> str:
        key = (i, idx)
        if key not in self.memo:
            self.memo[key] = self._value(i, idx, top)
        return self.memo[key]

    def _value(self, i: int, idx: Index, top: bool) -> str:
        g, s = self.w.g, self.w.s
        node = g.nodes[i]
        if i in self.given:
            return self.given[i]
        if i in s.part.literals:
            return texpr.literal(g.consts[node.arg], node.dtype)
        if i in s.part.materialized and not (top and node.op not in (Op.INPUT, Op.CONST)):
            return self.load(i, idx)
        if node.op in VIEW:
            return self._view(i, idx)
        if node.op is Op.IOTA:
            return self.emit(f"({self.index(idx[node.arg])}).to({texpr.tltype(node.dtype)})")
        if node.op is Op.GATHER:
            data, indices = node.src
            rank = len(g.nodes[indices].shape)
            ax = node.arg
            iv = self.value(indices, idx[ax : ax + rank])
            gname = self.checked_index(iv, g.nodes[data].shape[ax])
            return self.value(
                data, (*idx[:ax], Lin.of(Dyn(gname, g.nodes[data].shape[ax])), *idx[ax + rank :])
            )
        args = [self.value(src, idx) for src in node.src]
        if node.op is Op.CAST:
            return self.emit(texpr.cast(g.nodes[node.src[0]].dtype, node.dtype, args[0]))
        if node.op in UNARY:
            return self.emit(texpr.unary(node.op, node.dtype, args[0]))
        if node.op in BINARY:
            return self.emit(texpr.binary(node.op, g.nodes[node.src[0]].dtype, *args))
        if node.op is Op.WHERE:
            return self.emit(f"tl.where({args[0]}, {args[1]}, {args[2]})")
        raise AssertionError(f"cannot inline {node.op}")

    def checked_index(self, value: str, size: int) -> str:
        """A data-dependent index, checked against [0, size): out of range sets the error
        flag (the run then fails with a clear message) and reads element 0 instead."""
        self.w.uses_err = True
        gname, bad = self.w.fresh("g"), self.w.fresh("bad")
        self.lines += [
            f"{gname} = {value}",
            f"{bad} = ({gname} < 0) | ({gname} >= {size})",
            f"tl.store(err + {gname} * 0, 1, mask={bad})",
            f"{gname} = tl.where({bad}, 0, {gname}).to({self.w.idx_type})",
        ]
        return gname

    def _view(self, i: int, idx: Index) -> str:
        node = self.w.g.nodes[i]
        src = self.w.g.nodes[node.src[0]]
        sidx, checks = view_source(node, src.shape, idx)
        if not checks:
            return self.value(node.src[0], sidx)
        clamped = list(sidx)
        conds = []
        for k, e in enumerate(sidx):
            for chk in checks:
                if chk.expr == e and chk.size == src.shape[k]:
                    c, cc = self.w.fresh("c"), self.w.fresh("c")
                    self.lines.append(f"{c} = {self.index(e)}")
                    self.lines.append(f"{cc} = tl.minimum(tl.maximum({c}, 0), {chk.size - 1})")
                    conds.append(f"({c} >= 0) & ({c} < {chk.size})")
                    clamped[k] = Lin.of(Dyn(cc, chk.size))
                    break
        inner = self.value(node.src[0], tuple(clamped))
        fill = texpr.literal(node.arg[1], node.dtype)
        return self.emit(f"tl.where({' & '.join(conds)}, {inner}, {fill})")
