"""Which IR nodes get a buffer, and which are computed inline inside their consumer.

A kernel computes one materialized node; everything between it and the buffers it reads
is inlined into its loop body (views become index arithmetic, elementwise ops become
expressions).  A node is materialized when it is:

- a graph input, a constant with more than one element, or a graph output;
- a reduction (SUM, RMAX) or a SCATTER;
- computed (not a view) and used by two or more kernels, so it is not computed twice;
- computed and read through a broadcasting EXPAND, so it is not recomputed per copy;
- a PAD feeding a contraction, so the contraction's operands stay affine loads.

A widening load (`ir.narrow.widened_source`: an fp16/bf16 weight cast to f32, an i16
operand cast to i32) is part of the load that reads the narrow buffer, like a view: never
materialized for its readers; the narrow buffer is.
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.compiler.ir import DType, Graph, Op, numel
from luminal.compiler.ir.narrow import widened_source
from luminal.compiler.ir.ops import ELEMENTWISE, REDUCE, VIEW
from luminal.compiler.ir.precision import NARROW


@dataclass(frozen=True)
class Partition:
    materialized: frozenset[int]
    literals: frozenset[int]  # one-element constants, emitted as literals in code


def partition(graph: Graph) -> Partition:
    nodes = graph.nodes
    literals = {i for i, n in enumerate(nodes) if n.op is Op.CONST and numel(n.shape) == 1}
    mat: set[int] = {i for i, n in enumerate(nodes) if n.op is Op.INPUT}
    mat |= {i for i, n in enumerate(nodes) if n.op is Op.CONST and i not in literals}
    mat |= {i for i, n in enumerate(nodes) if n.op in REDUCE or n.op is Op.SCATTER}
    mat |= {i for _, i in graph.outputs}

    # The narrow buffer a widening load of a computed value reads (`ir.narrow`)
    mat |= {
        j
        for i in range(len(nodes))
        if (j := widened_source(graph, i)) is not None and nodes[j].op is not Op.CONST
    }

    consumers: list[list[int]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        for s in node.src:
            consumers[s].append(i)

    def computed(i: int) -> bool:
        if widened_source(graph, i) is not None:
            return False
        return nodes[i].op in ELEMENTWISE or nodes[i].op in (Op.GATHER, Op.IOTA)

    # Walk down through views from each node to the first non-view: what a view reads.
    def view_root(i: int) -> tuple[int, bool, bool]:
        """(root node, path has a growing EXPAND, path has a PAD)"""
        grows = pads = False
        while nodes[i].op in VIEW:
            node = nodes[i]
            src = nodes[node.src[0]]
            grows |= node.op is Op.EXPAND and numel(node.shape) > numel(src.shape)
            pads |= node.op is Op.PAD
            i = node.src[0]
        return i, grows, pads

    for i, node in enumerate(nodes):
        if node.op in VIEW:
            root, grows, _ = view_root(i)
            if grows and computed(root) and nodes[root].op is not Op.IOTA:
                mat.add(root)
    # A narrowing store of a pad (`ir.narrow`: a convolution's padded input as int16)
    # reads its source as a buffer: the source's computation (a requantize) stays the
    # epilogue of the kernel that produces it instead of running per padded element.
    for i in range(len(nodes)):
        j = widened_source(graph, i)
        if j is not None and nodes[j].op is Op.CAST:
            root, _, pads = view_root(nodes[j].src[0])
            if pads and computed(root):
                mat.add(root)
    # Operands of contractions: materialize pads (keeps loads affine) and computed roots.
    for node in nodes:
        if node.op is Op.SUM and nodes[node.src[0]].op is Op.MUL:
            for operand in nodes[node.src[0]].src:
                j = operand
                while nodes[j].op in VIEW:
                    if nodes[j].op is Op.PAD:
                        mat.add(j)
                        break
                    j = nodes[j].src[0]

    def rounded_only(i: int) -> bool:
        """A value read only through a rounding to fp16/bf16 and back (`ir.precision`),
        or that rounding's narrow half: the rounded value is what gets a buffer, if any,
        so that the rounding adds no kernel."""
        node = nodes[i]
        if node.op is Op.CAST and node.dtype in NARROW and node.src:
            return all(nodes[c].op is Op.CAST and nodes[c].dtype is DType.F32 for c in consumers[i])
        return bool(consumers[i]) and all(
            nodes[c].op is Op.CAST and nodes[c].dtype in NARROW for c in consumers[i]
        )

    # Computed nodes shared by several kernels, the last first: materializing the end of a
    # shared chain (a requantize read by a convolution and a residual add) unshares every
    # node before it, which then stays inside the one kernel that computes the chain.
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(nodes))):
            if i in mat or not computed(i) or nodes[i].op is Op.IOTA or rounded_only(i):
                continue
            if len(_kernels_reading(i, nodes, consumers, mat)) > 1:
                mat.add(i)
                changed = True
    return Partition(frozenset(mat - literals), frozenset(literals))


def _kernels_reading(i: int, nodes, consumers: list[list[int]], mat: set[int]) -> set[int]:  # type: ignore[no-untyped-def]
    """The materialized nodes whose kernels would inline node i (through any path)."""
    found: set[int] = set()
    stack = list(consumers[i])
    seen: set[int] = set()
    while stack:
        c = stack.pop()
        if c in mat:
            found.add(c)
        elif c not in seen:
            seen.add(c)
            stack.extend(consumers[c])
    return found


def leaves(graph: Graph, root: int, mat: frozenset[int]) -> list[int]:
    """Materialized nodes read by the kernel computing `root` (in first-use order)."""
    out: list[int] = []
    seen: set[int] = set()
    stack = list(reversed(graph.nodes[root].src)) if root in mat else [root]
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        if i in mat:
            out.append(i)
        else:
            stack.extend(reversed(graph.nodes[i].src))
    return out
