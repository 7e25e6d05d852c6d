"""Reduced precision: an f32 graph lowered to fp16 or bf16 storage, computing in f32.

    lower(graph, Precision.FP16) -> Graph

What an fp16 (or bf16) ONNX model run by ONNX Runtime's CPU kernels does, on an f32 graph:

- every f32 constant (the weights) is stored in the reduced type and widened where it is
  read: `CONST f16 -> CAST f32`, a *widening load* (`widened_const`) that the schedule
  treats as part of the load, so a contraction still reads the weight buffer itself, in
  half the bytes, converting each element as it loads it;
- every op's float result is rounded to the reduced type once, where another op reads it
  (`CAST f16 -> CAST f32`): one rounding per source-model op (the ONNX node names in
  `Graph.origins`), not one per primitive, and never between the multiply and the sum of a
  contraction, which accumulates in f32;
- graph inputs and outputs keep their declared f32 type: the caller feeds f32 and gets f32
  back.  An input is rounded where the model first reads it (the Cast an fp16 model would
  start with) and an output is the rounded value of its op, widened exactly.

A graph without origins (one built in code) rounds the result of every primitive instead:
more roundings, the same storage.  Finite constants beyond fp16's range are clamped to it
(as onnxconverter-common's fp16 conversion does), so a `-3.4e38` mask stays finite.
Activations between kernels are still stored in f32 (rounded values): only the weights'
bytes halve.
"""

from __future__ import annotations

import enum

import numpy as np

from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph, Node
from luminal.compiler.ir.ops import ELEMENTWISE, REDUCE, VIEW, Op


class Precision(enum.StrEnum):
    """`luminal compile --precision`: the storage type of an f32 model's floats."""

    FP32 = "fp32"  # as the model says
    FP16 = "fp16"  # IEEE half storage, f32 compute
    BF16 = "bf16"  # bfloat16 storage, f32 compute
    AUTO = "auto"  # the compiler's choice: fp32 today (docs/compiler.md, "Precision")

    @property
    def storage(self) -> DType | None:
        """The reduced storage type, None when the floats stay as they are."""
        return _STORAGE.get(self)

    def resolved(self) -> Precision:
        """What `auto` builds: fp32, until a reduced build is measured faster here."""
        return Precision.FP32 if self is Precision.AUTO else self


_STORAGE = {Precision.FP16: DType.F16, Precision.BF16: DType.BF16}
NARROW = frozenset(_STORAGE.values())
#: Ops whose f32 result is a new value (rounded); views only move rounded values.
_ROUNDED = ELEMENTWISE | REDUCE | {Op.GATHER, Op.SCATTER, Op.INPUT}


def widened_const(graph: Graph, i: int) -> int | None:
    """The constant node that node `i` widens to f32, when `i` is a widening load
    (`CAST f32` of an fp16 or bf16 constant); else None."""
    node = graph.nodes[i]
    if node.op is not Op.CAST or node.dtype is not DType.F32:
        return None
    src = graph.nodes[node.src[0]]
    return node.src[0] if src.op is Op.CONST and src.dtype in NARROW else None


def lower(graph: Graph, precision: Precision) -> Graph:
    """`graph` with fp32 storage lowered to `precision`'s (module docstring); the graph
    itself for fp32 and auto."""
    storage = precision.resolved().storage
    if storage is None:
        return graph
    nodes, named = graph.nodes, bool(graph.origins)
    new: list[Node] = []
    origins: dict[int, tuple[str, ...]] = {}
    remap: dict[int, int] = {}  # old node -> its value in `new`
    rounded: dict[int, int] = {}  # old node -> its rounded f32 value in `new`
    consts = dict(graph.consts)
    narrowed: set[str] = set()

    def add(node: Node, origin: tuple[str, ...]) -> int:
        new.append(node)
        if origin:
            origins[len(new) - 1] = origin
        return len(new) - 1

    def rounds(i: int) -> bool:
        """Whether `i` is an f32 op result: computed, or a view of one (an op's result
        may be a reshape of its sum)."""
        while nodes[i].op in VIEW:
            i = nodes[i].src[0]
        return nodes[i].dtype is DType.F32 and nodes[i].op in _ROUNDED

    def boundary(s: int, c: int) -> bool:
        """Whether consumer `c` reads `s` as another op's result."""
        if not rounds(s) or (nodes[s].op is Op.MUL and nodes[c].op is Op.SUM):
            return False
        return not named or graph.origins.get(s, ()) != graph.origins.get(c, ())

    def rounded_of(i: int) -> int:
        """`i`'s value rounded: at its root, so a view of it (a broadcast of 768 columns
        to 768 x 768 for a matmul) views the rounded value rather than rounding every
        copy."""
        if i not in rounded:
            n, o = nodes[i], graph.origins.get(i, ())
            if n.op in VIEW:
                src = rounded_of(n.src[0])
                rounded[i] = add(Node(n.op, (src,), n.shape, n.dtype, n.arg), o)
            else:
                narrow = add(Node(Op.CAST, (remap[i],), n.shape, storage), o)
                rounded[i] = add(Node(Op.CAST, (narrow,), n.shape, DType.F32), o)
        return rounded[i]

    for i, n in enumerate(nodes):
        if n.op is Op.CONST and n.dtype is DType.F32:
            if n.arg not in narrowed:
                consts[n.arg] = narrow_array(consts[n.arg], storage)
                narrowed.add(n.arg)
            c = add(Node(Op.CONST, (), n.shape, storage, n.arg), ())
            remap[i] = add(Node(Op.CAST, (c,), n.shape, DType.F32), ())
            continue
        srcs = tuple(rounded_of(s) if boundary(s, i) else remap[s] for s in n.src)
        remap[i] = add(Node(n.op, srcs, n.shape, n.dtype, n.arg), graph.origins.get(i, ()))
    outputs = tuple(
        (name, rounded_of(i) if rounds(i) and nodes[i].op is not Op.INPUT else remap[i])
        for name, i in graph.outputs
    )
    return Graph(
        nodes=tuple(new),
        inputs=tuple((name, remap[i]) for name, i in graph.inputs),
        outputs=outputs,
        consts=consts,
        origins=origins,
    )


def narrow_array(array: np.ndarray, storage: DType) -> np.ndarray:
    """An f32 array in `storage`, rounded to nearest even; finite values beyond the
    type's range are clamped to its largest finite value."""
    limit = float(np.finfo(np.float16).max) if storage is DType.F16 else None
    a = np.asarray(array, dtype=np.float32)
    if limit is not None:
        a = np.where(np.isfinite(a), np.clip(a, -limit, limit), a)
    return np.ascontiguousarray(a.astype(storage.np))


__all__ = ["NARROW", "Precision", "lower", "narrow_array", "widened_const"]
