"""Integer value ranges: a closed interval [lo, hi] that holds every element of a node.

    bounds(graph) -> (Interval | None, ...)          # one per node, None: unknown

An interval analysis over the IR, one forward pass in topological order (nodes point
backwards).  Sources: an integer input or cast from an integer type has its type's
range, a constant its min and max, an iota [0, dim - 1].  Arithmetic combines intervals
(add, mul, max, where's two branches; sub and neg are add and mul by -1 in the IR), views
keep their source's (a pad adds its fill value), and a cast to an integer type keeps the
interval when the type holds it (else the type's range: the cast wraps).  Float values,
reductions and everything else are unknown.

Its use: deciding that an i32 contraction operand (`cast(u8, i32) - zero_point`, a weight
folded to i32) fits 16 bits, so it can be stored as int16 (`ir/narrow.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph, Node
from luminal.compiler.ir.ops import VIEW, Op


@dataclass(frozen=True)
class Interval:
    lo: int
    hi: int

    def __add__(self, other: Interval) -> Interval:
        return Interval(self.lo + other.lo, self.hi + other.hi)

    def __mul__(self, other: Interval) -> Interval:
        c = [a * b for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        return Interval(min(c), max(c))

    def join(self, other: Interval) -> Interval:
        return Interval(min(self.lo, other.lo), max(self.hi, other.hi))

    def within(self, dtype: DType) -> bool:
        """Whether every value of the interval is representable in integer `dtype`."""
        full = type_range(dtype)
        return full is not None and full.lo <= self.lo and self.hi <= full.hi


def type_range(dtype: DType) -> Interval | None:
    """All values of an integer type (bool: [0, 1]); None for floats."""
    if dtype is DType.BOOL:
        return Interval(0, 1)
    if not dtype.is_int:
        return None
    info = np.iinfo(dtype.np)
    return Interval(int(info.min), int(info.max))


def bounds(graph: Graph) -> tuple[Interval | None, ...]:
    """Every node's value interval (None where it is not an integer or not known)."""
    out: list[Interval | None] = []
    for node in graph.nodes:
        out.append(_node(graph, node, out))
    return tuple(out)


def _node(graph: Graph, node: Node, known: list[Interval | None]) -> Interval | None:
    if node.dtype.is_float:
        return None
    src = [known[s] for s in node.src]
    op = node.op
    if op is Op.CONST:
        a = np.asarray(graph.consts[node.arg])
        if a.size == 0 or a.dtype.kind not in "iub":
            return type_range(node.dtype)
        return Interval(int(a.min()), int(a.max()))
    if op is Op.IOTA:
        return Interval(0, max(0, node.shape[node.arg] - 1))
    if op is Op.CAST:
        have = src[0] if src[0] is not None else type_range(graph.nodes[node.src[0]].dtype)
        full = type_range(node.dtype)
        if have is None:  # from a float: anything the type holds
            return full
        if node.dtype is DType.BOOL:
            return Interval(0, 1)
        return have if have.within(node.dtype) else full
    if op in VIEW:
        if src[0] is None:
            return None
        if op is Op.PAD:
            fill = int(node.arg[1])
            return src[0].join(Interval(fill, fill))
        return src[0]
    if op in (Op.ADD, Op.MUL, Op.MAX) and None not in src:
        a, b = src
        assert a is not None and b is not None
        if op is Op.ADD:
            r = a + b
        elif op is Op.MUL:
            r = a * b
        else:
            r = Interval(max(a.lo, b.lo), max(a.hi, b.hi))
        return r if r.within(node.dtype) else type_range(node.dtype)  # wraps
    if op is Op.WHERE and src[1] is not None and src[2] is not None:
        return src[1].join(src[2])
    return type_range(node.dtype)


__all__ = ["Interval", "bounds", "type_range"]
