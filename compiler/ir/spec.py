"""The IR spec, executable: `check(graph)` verifies a graph after any pass.

Each node is replayed through a non-folding GraphBuilder, whose constructors hold the
typing rules, and the declared shape and dtype must equal what the rules infer.
"""

from __future__ import annotations

from luminal.compiler.ir.builder import GraphBuilder, Value
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph, Node
from luminal.compiler.ir.ops import ARITY, BINARY, REDUCE, UNARY, Op
from luminal.errors import GraphError


def check(graph: Graph) -> None:
    """Raise GraphError naming the first node that breaks the spec."""
    b = GraphBuilder(fold=False)
    values: list[Value] = []
    for i, node in enumerate(graph.nodes):
        if len(node.src) != ARITY[node.op] or any(not 0 <= s < i for s in node.src):
            raise GraphError(f"node %{i} ({node.op.value}) has bad operands {node.src}")
        try:
            got = replay(b, graph, node, [values[s] for s in node.src])
        except GraphError as err:
            raise GraphError(f"node %{i} ({node.op.value}): {err}") from None
        if (got.shape, got.dtype) != (node.shape, node.dtype):
            raise GraphError(
                f"node %{i} ({node.op.value}) declares {node.shape} {node.dtype.value}, "
                f"rules give {got.shape} {got.dtype.value}"
            )
        values.append(got)
    names = [n for n, _ in graph.inputs]
    if len(set(names)) != len(names):
        raise GraphError(f"duplicate input names {names}")
    for name, i in graph.inputs:
        if graph.nodes[i].op is not Op.INPUT or graph.nodes[i].arg != name:
            raise GraphError(f"input '{name}' does not point at its INPUT node")
    for name, i in graph.outputs:
        if not 0 <= i < len(graph.nodes):
            raise GraphError(f"output '{name}' points outside the graph")


def replay(b: GraphBuilder, graph: Graph, node: Node, srcs: list[Value]) -> Value:
    op, arg = node.op, node.arg
    if op is Op.INPUT:
        return b.input(arg, node.shape, node.dtype)
    if op is Op.CONST:
        if arg not in graph.consts:
            raise GraphError(f"constant '{arg}' missing from the graph's store")
        return b.const(graph.consts[arg], name=f"{arg}")
    if op is Op.IOTA:
        return b.iota(node.shape, arg, node.dtype)
    if op is Op.CAST:
        (x,) = srcs
        return b.cast(x, node.dtype) if x.dtype is not node.dtype else _same(node)
    if op in UNARY:
        return b.unary(op, *srcs)
    if op in BINARY:
        return b.binary(op, *srcs)
    if op is Op.WHERE:
        return b.where(*srcs)
    if op in REDUCE:
        return b.reduce(op, srcs[0], arg)
    if op is Op.GATHER:
        return b.gather(srcs[0], srcs[1], arg)
    if op is Op.SCATTER:
        return b.scatter(srcs[0], srcs[1], srcs[2], arg)
    (x,) = srcs
    if op is Op.RESHAPE:
        return b.reshape(x, arg)
    if op is Op.PERMUTE:
        return b.permute(x, arg)
    if op is Op.EXPAND:
        return b.expand(x, arg)
    if op is Op.PAD:
        widths, value = arg
        return b.pad(x, widths, value)
    if op is Op.SLICE:
        return b.slice(
            x, [(start, step, n) for (start, step), n in zip(arg, node.shape, strict=True)]
        )
    raise GraphError(f"unknown op {op}")


def _same(node: Node) -> Value:
    raise GraphError(f"cast to its own dtype {node.dtype.value}")


__all__ = ["DType", "check", "replay"]
