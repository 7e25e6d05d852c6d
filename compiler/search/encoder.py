"""From an IR graph to e-graph terms: every node once, as a let binding.

Each node becomes the constructor of its op's `Term`, over its operands' terms, with the
params the table says to read from the node (`Source`).  Leaves are special:

- `Input(name)` and `Const(key)` are opaque, by id: their shapes and dtypes are set as
  facts, and a `Const`'s array stays in Python;
- a finite one-element float constant becomes `Fill(value, shape, dtype)`, a literal that
  egglog folds arithmetic on with its own f64 primitives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from egglog import EGraph, PyObject, set_

from luminal.compiler.ir.graph import Graph, Node
from luminal.compiler.ir.ops import Op
from luminal.compiler.search.analyses import dtype, shape
from luminal.compiler.search.language import Param, Sort, Source, Term
from luminal.compiler.search.terms import CONSTRUCTORS, Const, Fill, Input, Tensor


@dataclass(frozen=True)
class Encoding:
    """A graph inserted into a fresh e-graph.  Node i is the let binding `n<i>`, output k
    is `__out<k>`; `original` lists (node, term, operand nodes) so the report can tell
    extracted e-nodes that were already in the graph from rewritten ones."""

    egraph: EGraph
    graph: Graph
    roots: dict[str, str]  # let name -> output name
    original: tuple[tuple[int, Term, tuple[int, ...]], ...] = ()


def is_scalar_fill(graph: Graph, index: int) -> bool:
    node = graph.nodes[index]
    if node.op is not Op.CONST or not node.dtype.is_float:
        return False
    value = graph.consts[node.arg]
    return value.size == 1 and bool(np.isfinite(value).all())


def term_for(node: Node, operands: list[Tensor]) -> Tensor:
    """The constructor call for one IR node over already-built operand terms."""
    term = Term.of(node.op)
    return CONSTRUCTORS[term](*operands, *(_param(p, node) for p in term.params))


def _param(param: Param, node: Node) -> object:
    source, arg = param.source, node.arg
    if source is Source.ARG:
        if param.sort is Sort.I64:
            return int(arg)
        return PyObject(tuple(arg)) if param.sort is Sort.OBJECT else arg
    if source is Source.ARG_AND_SHAPE:
        return PyObject((tuple(arg), node.shape))
    if source is Source.SHAPE:
        return PyObject(node.shape)
    if source is Source.DTYPE:
        return node.dtype.value
    raise ValueError(f"{param.name} of {node.op} is not read from an IR node")


def encode(
    graph: Graph, leaf_names: Mapping[int, str] | None = None, keep: tuple[int, ...] = ()
) -> Encoding:
    """Insert `graph` into a new e-graph.  `leaf_names` turns nodes into opaque Input
    leaves (block outputs; what is behind them is not inserted); `keep` nodes stay
    extractable even if no output needs them (block entries and parameters)."""
    egraph = EGraph()
    leaf_names = leaf_names or {}
    terms: list[Tensor | None] = [None] * len(graph.nodes)
    facts = []
    original = []
    needed = _needed(graph, leaf_names, keep)
    for i, node in enumerate(graph.nodes):
        if not needed[i]:
            continue
        dt = node.dtype.value
        srcs: tuple[int, ...] = ()
        if i in leaf_names or node.op is Op.INPUT:
            name = leaf_names.get(i, node.arg)
            term: Tensor = Input(name)
            kind = Term.INPUT
            facts += [set_(shape(term)).to(PyObject(node.shape)), set_(dtype(term)).to(dt)]
        elif node.op is Op.CONST:
            if is_scalar_fill(graph, i):
                value = float(np.asarray(graph.consts[node.arg], dtype=np.float64).reshape(-1)[0])
                term, kind = Fill(value, PyObject(node.shape), dt), Term.FILL
            else:
                term, kind = Const(node.arg), Term.CONST
                facts += [set_(shape(term)).to(PyObject(node.shape)), set_(dtype(term)).to(dt)]
        else:
            srcs = node.src
            term = term_for(node, [terms[s] for s in srcs])  # type: ignore[misc]
            kind = Term.of(node.op)
        # Bind every node so the Python term stays a reference, not a growing tree.
        terms[i] = egraph.let(f"n{i}", term)
        original.append((i, kind, srcs))
    roots = {}
    for k, (name, i) in enumerate(graph.outputs):
        egraph.let(f"__out{k}", terms[i])  # type: ignore[arg-type]
        roots[f"__out{k}"] = name
    if facts:
        egraph.register(*facts)
    return Encoding(egraph, graph, roots, tuple(original))


def _needed(graph: Graph, leaves: Mapping[int, str], keep: tuple[int, ...]) -> list[bool]:
    needed = [False] * len(graph.nodes)
    for i in (*(i for _, i in graph.outputs), *keep):
        needed[i] = True
    for i in range(len(graph.nodes) - 1, -1, -1):
        if needed[i] and i not in leaves:
            for s in graph.nodes[i].src:
                needed[s] = True
    return needed
