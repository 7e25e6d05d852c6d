"""IR graph: frozen nodes in topological order, named inputs and outputs, constant store.

A node refers to its operands by index into `Graph.nodes`; indices always point
backwards, so the tuple order is a valid execution order.  Shapes are static tuples of
ints today; symbolic dims (batch, sequence) are bound to sizes by the frontends, and the
`Shape` alias is the one place to widen when the IR learns symbols.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.ops import Op

Shape = tuple[int, ...]


def numel(shape: Shape) -> int:
    return math.prod(shape)


@dataclass(frozen=True, slots=True)
class Node:
    op: Op
    src: tuple[int, ...]
    shape: Shape
    dtype: DType
    arg: Any = None


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """Name, shape and dtype of a graph input or output."""

    name: str
    shape: Shape
    dtype: DType


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    consts: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: node index -> names of the source-model nodes (ONNX node names) it came from;
    #: nodes absent were made outside any source node (or the frontend kept no names).
    origins: Mapping[int, tuple[str, ...]] = field(default_factory=dict, compare=False)

    def input_specs(self) -> tuple[TensorSpec, ...]:
        return tuple(self._spec(name, i) for name, i in self.inputs)

    def output_specs(self) -> tuple[TensorSpec, ...]:
        return tuple(self._spec(name, i) for name, i in self.outputs)

    def _spec(self, name: str, index: int) -> TensorSpec:
        node = self.nodes[index]
        return TensorSpec(name, node.shape, node.dtype)

    def op_histogram(self) -> dict[str, int]:
        counts = collections.Counter(node.op.value for node in self.nodes)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def const_bytes(self) -> int:
        return sum(int(a.nbytes) for a in self.consts.values())

    def use_counts(self) -> list[int]:
        uses = [0] * len(self.nodes)
        for node in self.nodes:
            for s in node.src:
                uses[s] += 1
        for _, i in self.outputs:
            uses[i] += 1
        return uses


def format_graph(graph: Graph, limit: int | None = None) -> str:
    """Readable one-line-per-node listing, for debugging and `inspect --ir`."""
    lines = []
    names = {i: n for n, i in graph.inputs}
    for i, node in enumerate(graph.nodes[:limit]):
        args = ", ".join(f"%{s}" for s in node.src)
        extra = f" {node.arg!r}" if node.arg is not None else ""
        label = f"  # input {names[i]}" if i in names else ""
        dims = "x".join(map(str, node.shape)) or "scalar"
        lines.append(f"%{i} = {node.op.value}({args}){extra} : {dims} {node.dtype.value}{label}")
    outs = ", ".join(f"{n}=%{i}" for n, i in graph.outputs)
    lines.append(f"return {outs}")
    return "\n".join(lines)


def check_feeds(specs: tuple[TensorSpec, ...], inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """The arrays for `specs`, in order, from a name -> array mapping; a missing, extra,
    misshapen or mistyped input is a one-line `UsageError` naming it.  Every runner (the
    interpreter, compiled sessions, other backends) takes its inputs through here."""
    from luminal.errors import UsageError

    extra = set(inputs) - {s.name for s in specs}
    if extra:
        raise UsageError(
            f"unknown input(s) {sorted(extra)}; the model takes {[s.name for s in specs]}"
        )
    out = []
    for s in specs:
        if s.name not in inputs:
            described = f"{'x'.join(map(str, s.shape)) or 'scalar'} {s.dtype.value}"
            raise UsageError(f"missing input '{s.name}' ({described})")
        a = np.asarray(inputs[s.name])
        if a.shape != s.shape:
            raise UsageError(f"input '{s.name}' has shape {a.shape}, the model wants {s.shape}")
        if a.dtype != s.dtype.np:
            raise UsageError(
                f"input '{s.name}' has dtype {a.dtype}, the model wants {s.dtype.value}"
            )
        out.append(a)
    return out
