"""Narrow integer storage: i32 contraction operands that fit 16 bits are stored as i16.

    narrow_operands(graph) -> Graph

A quantized model's integer contractions (`frontend/onnx_ops/quant.py`) multiply
`cast(x_u8, i32) - zx` by a weight `cast(w_i8, i32) - zw` folded to an i32 constant and
sum in i32.  Both operands lie in [-255, 255] (`ir.ranges`), so each is stored as int16
and widened where it is read, as `ir.precision` stores fp16 weights:

- a constant operand becomes an i16 constant read through `CAST i32`: the weights blob
  holds half the bytes;
- a computed operand `v` (or the PAD of it that the contraction reads) becomes
  `CAST i32 (CAST i16 v)`: the narrowing cast is the buffer (its kernel writes int16),
  the widening cast is part of every load of it (`widened_source`), like a view.

The stored value equals the i32 value, so the graph means what it meant; a backend that
knows the operands are i16 (`backends/cpu/igemm.py`: `vpmaddwd`) multiplies them as
such.  A graph output, a one-element constant or an operand that may not fit is left
as it is.
"""

from __future__ import annotations

import numpy as np

from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph, Node, numel
from luminal.compiler.ir.ops import VIEW, Op
from luminal.compiler.ir.ranges import Interval, bounds

#: Narrow storage type of each wide integer type the pass narrows.
NARROWER = {DType.I32: DType.I16}


def widened_source(graph: Graph, i: int) -> int | None:
    """The narrow node that node `i` widens, when `i` is a widening load: `CAST f32` of
    an fp16/bf16 constant (`ir.precision`), or `CAST i32` of an i16 constant or of a
    narrowing `CAST i16` of an i32 value (this module); else None."""
    node = graph.nodes[i]
    if node.op is not Op.CAST or not node.src:
        return None
    src = graph.nodes[node.src[0]]
    if node.dtype is DType.F32:
        ok = src.op is Op.CONST and src.dtype in (DType.F16, DType.BF16)
    elif node.dtype in NARROWER and src.dtype is NARROWER[node.dtype]:
        ok = src.op is Op.CONST or (
            src.op is Op.CAST and graph.nodes[src.src[0]].dtype is node.dtype
        )
    else:
        ok = False
    return node.src[0] if ok else None


def narrowing_points(graph: Graph) -> dict[int, DType]:
    """Node -> narrow type, for each i32 contraction operand's buffer that fits it: the
    first non-view node (or PAD) under each operand of a `SUM(MUL)`.  Its range must be
    symmetric in the type (i16: [-32767, 32767]), so that no product is 2^30 and a
    pair of them (`vpmaddwd`) never overflows i32."""
    nodes = graph.nodes
    ranges = bounds(graph)
    outputs = {i for _, i in graph.outputs}
    points: dict[int, DType] = {}
    for node in nodes:
        if node.op is not Op.SUM or nodes[node.src[0]].op is not Op.MUL:
            continue
        mul = nodes[node.src[0]]
        narrow = NARROWER.get(mul.dtype)
        if narrow is None or node.dtype is not mul.dtype:
            continue
        for j in mul.src:
            while nodes[j].op in VIEW and nodes[j].op is not Op.PAD:
                j = nodes[j].src[0]
            n, r = nodes[j], ranges[j]
            if (
                r is None
                or not (r.within(narrow) and Interval(-r.hi, -r.lo).within(narrow))
                or j in outputs
                or n.op in (Op.INPUT, Op.IOTA)
                or (n.op is Op.CONST and numel(n.shape) == 1)
                or widened_source(graph, j) is not None
            ):
                continue
            points[j] = narrow
    return points


def narrow_operands(graph: Graph) -> Graph:
    """`graph` with its narrowable contraction operands stored narrow (module docstring);
    the graph itself when there are none."""
    points = narrowing_points(graph)
    if not points:
        return graph
    new: list[Node] = []
    origins: dict[int, tuple[str, ...]] = {}
    remap: dict[int, int] = {}
    consts = dict(graph.consts)

    def add(node: Node, origin: tuple[str, ...]) -> int:
        new.append(node)
        if origin:
            origins[len(new) - 1] = origin
        return len(new) - 1

    for i, n in enumerate(graph.nodes):
        o = graph.origins.get(i, ())
        if i not in points:
            srcs = tuple(remap[s] for s in n.src)
            remap[i] = add(Node(n.op, srcs, n.shape, n.dtype, n.arg), o)
            continue
        narrow = points[i]
        if n.op is Op.CONST:
            key = f"{n.arg}:{narrow.value}"
            consts[key] = np.ascontiguousarray(np.asarray(graph.consts[n.arg]).astype(narrow.np))
            stored = add(Node(Op.CONST, (), n.shape, narrow, key), o)
        else:
            wide = add(Node(n.op, tuple(remap[s] for s in n.src), n.shape, n.dtype, n.arg), o)
            stored = add(Node(Op.CAST, (wide,), n.shape, narrow), o)
        remap[i] = add(Node(Op.CAST, (stored,), n.shape, n.dtype), o)
    return Graph(
        nodes=tuple(new),
        inputs=tuple((name, remap[i]) for name, i in graph.inputs),
        outputs=tuple((name, remap[i]) for name, i in graph.outputs),
        consts=consts,
        origins=origins,
    )


__all__ = ["NARROWER", "narrow_operands", "narrowing_points", "widened_source"]
