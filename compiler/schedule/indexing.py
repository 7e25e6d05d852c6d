"""Views as index arithmetic: where a view's element (i0, i1, ...) lives in its source.

`row_major(idx, shape)` is the flat offset of a multi-index; `view_source(node, idx)`
maps a view's index to its source's index (PAD also yields the in-bounds conditions);
`trace_load` follows a chain of pure views (and a widening load of a reduced-precision
weight, which converts each element as it is read) to a buffer and gives the flat offset
there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from luminal.compiler.ir import Graph, Node, Op, Shape
from luminal.compiler.ir.narrow import widened_source
from luminal.compiler.schedule.symbolic import Div, Lin, Mod, Var

Index = tuple[Lin, ...]


def row_major(idx: Sequence[Lin], shape: Shape) -> Lin:
    flat = Lin()
    stride = 1
    for e, d in zip(reversed(idx), reversed(shape), strict=True):
        if d != 1:
            flat = flat + e * stride
        stride *= d
    return flat


def unflatten(flat: Lin, shape: Shape) -> Index:
    out = []
    stride = 1
    strides = []
    for d in reversed(shape):
        strides.append(stride)
        stride *= d
    strides.reverse()
    for k, (d, s) in enumerate(zip(shape, strides, strict=True)):
        if d == 1:
            out.append(Lin())
            continue
        e = flat // s
        out.append(e if k == 0 else e % d)
    return tuple(out)


@dataclass(frozen=True)
class PadCheck:
    """Index `expr` of a padded axis must lie in [0, size) for the source to be read."""

    expr: Lin
    size: int


def view_source(node: Node, src_shape: Shape, idx: Index) -> tuple[Index, tuple[PadCheck, ...]]:
    """Source index of a view's element; PAD returns unclamped indices plus the checks
    that the index ranges (`Lin.bounds`) do not already prove (a pooling window's interior,
    generated as loops of their own, reads without any)."""
    op, arg = node.op, node.arg
    if op is Op.RESHAPE:
        return unflatten(row_major(idx, node.shape), src_shape), ()
    if op is Op.PERMUTE:
        src: list[Lin] = [Lin()] * len(arg)
        for k, p in enumerate(arg):
            src[p] = idx[k]
        return tuple(src), ()
    if op is Op.EXPAND:
        return tuple(Lin() if s == 1 else e for e, s in zip(idx, src_shape, strict=True)), ()
    if op is Op.SLICE:
        return tuple(
            Lin(const=start) + e * step for e, (start, step) in zip(idx, arg, strict=True)
        ), ()
    if op is Op.PAD:
        widths, _ = arg
        out, checks = [], []
        for e, (before, after), size in zip(idx, widths, src_shape, strict=True):
            shifted = e + (-before)
            out.append(shifted)
            lo, hi = shifted.bounds
            if (before or after) and not 0 <= lo <= hi < size:  # provably inside: no check
                checks.append(PadCheck(shifted, size))
        return tuple(out), tuple(checks)
    raise AssertionError(f"{op} is not a view")


def trace_load(graph: Graph, mat: frozenset[int], i: int, idx: Index) -> tuple[int, Lin] | None:
    """Follow views (no PAD) from node i to a materialized node: (node, flat offset).
    The node may be a narrow buffer (an fp16 weight, an i16 operand) that the views read
    through a widening cast (`ir.narrow.widened_source`)."""
    while i not in mat:
        node = graph.nodes[i]
        if (w := widened_source(graph, i)) is not None:
            i = w
            continue
        if node.op not in (Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE):
            return None
        idx, _ = view_source(node, graph.nodes[node.src[0]].shape, idx)
        i = node.src[0]
    return i, row_major(idx, graph.nodes[i].shape)


def split_loops(
    loops: Sequence[Var], reduced: frozenset[Var], exprs: Sequence[Lin]
) -> tuple[list[Var], frozenset[Var], list[Lin]]:
    """Split a loop variable v into (v_hi, v_lo) wherever an index divides or reduces v
    by a d that divides its size: v = d*v_hi + v_lo turns `v // d` and `v % d` affine.
    This is how a contraction reads an operand through reshape(permute(buffer)).  The
    halves of a reduced variable are reduced."""
    loops, exprs, red = list(loops), list(exprs), set(reduced)
    changed = True
    while changed:
        changed = False
        for e in exprs:
            for atom, _ in e.terms:
                if not isinstance(atom, (Div, Mod)):
                    continue
                inner = atom.x
                if inner.const or len(inner.terms) != 1 or inner.terms[0][1] != 1:
                    continue
                v = inner.terms[0][0]
                if (
                    not isinstance(v, Var)
                    or v not in loops
                    or v.size % atom.d
                    or atom.d in (1, v.size)
                ):
                    continue
                hi, lo = Var(f"{v.name}h", v.size // atom.d), Var(f"{v.name}l", atom.d)
                sub = {v: Lin.of(hi) * atom.d + Lin.of(lo)}
                exprs = [x.substitute(sub) for x in exprs]
                k = loops.index(v)
                loops[k : k + 1] = [hi, lo]
                if v in red:
                    red |= {hi, lo}
                changed = True
                break
            if changed:
                break
    return loops, frozenset(red & set(loops)), exprs


def merge_loops(
    loops: Sequence[Var], reduced: frozenset[Var], exprs: Sequence[Lin]
) -> tuple[list[Var], frozenset[Var], list[Lin]]:
    """Merge adjacent loop variables (outer u, inner v; both reduced or both not) that
    every index steps through as one: coeff(u) == coeff(v) * v.size in each, so
    u * v.size + v is one variable w and every index reads c * w.  A 1x1 convolution's
    output positions (oh, ow) then form one output loop as long as the image: a
    column tile along it is full width (an output row of 28 filled 28 of 32 lanes, and
    each row tile packed its Y panel anew) and the product is one matrix, not a batch of
    row-sized ones.  Exact for affine indices (the caller's): no division is introduced."""
    loops, exprs, red = list(loops), list(exprs), set(reduced)
    k = 0
    while k + 1 < len(loops):
        u, v = loops[k], loops[k + 1]
        if (u in red) != (v in red) or any(e.coeff(u) != e.coeff(v) * v.size for e in exprs):
            k += 1
            continue
        w = Var(f"{u.name}_{v.name}", u.size * v.size)
        sub = {u: Lin(), v: Lin.of(w)}
        exprs = [e.substitute(sub) for e in exprs]
        loops[k : k + 2] = [w]
        if u in red:
            red |= {w}
    return loops, frozenset(red & set(loops)), exprs


def loads_of(
    graph: Graph, mat: frozenset[int], root: int, target: int, idx: Index
) -> list[Lin] | None:
    """Flat offsets at which computing `root` at `idx` reads buffer `target`, or None when
    some read of it is data-dependent or padded (and so cannot be matched statically)."""
    found: list[Lin] = []
    stack = [(root, idx)]
    seen: set[tuple[int, Index]] = set()  # a value read twice (x * x, a rounding) is walked once
    while stack:
        i, at = stack.pop()
        if (i, at) in seen:
            continue
        seen.add((i, at))
        node = graph.nodes[i]
        if i == target:
            found.append(row_major(at, node.shape))
        elif (i in mat and i != root) or node.op in (Op.CONST, Op.IOTA, Op.INPUT):
            continue
        elif node.op in (Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE):
            src, _ = view_source(node, graph.nodes[node.src[0]].shape, at)
            stack.append((node.src[0], src))
        elif node.op in (Op.PAD, Op.GATHER, Op.SCATTER) or node.op in (Op.SUM, Op.RMAX):
            if _reaches(graph, mat, i, target):
                return None
        else:
            stack.extend((s, at) for s in node.src)
    return found


def _reaches(graph: Graph, mat: frozenset[int], i: int, target: int) -> bool:
    stack, seen = [i], set()
    while stack:
        j = stack.pop()
        if j == target:
            return True
        if j in seen or (j in mat and j != i):
            continue
        seen.add(j)
        stack.extend(graph.nodes[j].src)
    return False
