"""Static facts about a graph: operation counts and sizes, for `inspect` and cost models."""

from __future__ import annotations

from luminal.compiler.ir.graph import Graph, numel
from luminal.compiler.ir.ops import ELEMENTWISE, REDUCE, Op


def flops(graph: Graph) -> int:
    """Arithmetic operations: one per element of every elementwise result (casts are
    free), and one per element folded away by a reduction.  A matmul decomposed into
    MUL + SUM therefore counts the usual 2*M*N*K (less M*N)."""
    total = 0
    for node in graph.nodes:
        if node.op in ELEMENTWISE and node.op is not Op.CAST:
            total += numel(node.shape)
        elif node.op in REDUCE:
            src = graph.nodes[node.src[0]]
            total += numel(src.shape) - numel(node.shape)
    return total
