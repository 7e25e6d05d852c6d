"""A saturated e-graph read back into plain Python: e-nodes per e-class, the analyses, the
let bindings, and which rule families added alternatives.

egglog's frozen e-graph names each row's function; `Term.named` turns a constructor's name
back into its term, whose arity says which inputs are tensor operands (e-classes) and
whose params say how to convert the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from egglog import EGraph

from luminal.compiler.search.language import BY_NAME, Sort, Term


@dataclass(frozen=True)
class ENode:
    op: Term
    children: tuple[int, ...]  # e-class ids of the Tensor operands, in order
    params: tuple[object, ...]  # the primitive arguments, in order


@dataclass(frozen=True)
class EGraphView:
    """A plain-Python snapshot of the e-graph: e-nodes per e-class, analyses, roots."""

    nodes: list[ENode]
    node_class: list[int]
    classes: list[list[int]]
    shapes: dict[int, tuple[int, ...]]
    dtypes: dict[int, str]
    lets: dict[str, int]  # let name -> e-class
    made: dict[int, set[str]]  # e-class -> rule families that added an alternative to it

    @property
    def enodes(self) -> int:
        return len(self.nodes)


def snapshot(egraph: EGraph) -> EGraphView:
    raw = egraph._egraph  # the bindings object: values convert without the high-level layer
    frozen = raw.freeze()
    ids: dict[object, int] = {}

    def cls(value: object) -> int:
        return ids.setdefault(value, len(ids))

    nodes: list[ENode] = []
    node_class: list[int] = []
    shapes: dict[int, tuple[int, ...]] = {}
    dtypes: dict[int, str] = {}
    lets: dict[str, int] = {}
    made: dict[int, set[str]] = {}
    convert = {
        Sort.STRING: raw.value_to_string,
        Sort.F64: raw.value_to_f64,
        Sort.I64: raw.value_to_i64,
        Sort.OBJECT: raw.value_to_pyobject,
    }
    for name, fn in frozen.functions.items():
        if fn.is_let_binding:
            for row in fn.rows:
                lets[name.lstrip("$")] = cls(row.output)
            continue
        if name == "shape":
            for row in fn.rows:
                if not row.subsumed:
                    shapes[cls(row.inputs[0])] = tuple(raw.value_to_pyobject(row.output))
            continue
        if name == "made":
            for row in fn.rows:
                made.setdefault(cls(row.inputs[0]), set()).add(raw.value_to_string(row.inputs[1]))
            continue
        if name == "dtype":
            for row in fn.rows:
                dtypes[cls(row.inputs[0])] = raw.value_to_string(row.output)
            continue
        term = BY_NAME.get(name)
        if term is None:
            continue
        for row in fn.rows:
            if row.subsumed:
                continue
            operands, rest = row.inputs[: term.arity], row.inputs[term.arity :]
            children = tuple(cls(value) for value in operands)
            params = tuple(convert[p.sort](v) for p, v in zip(term.params, rest, strict=True))
            nodes.append(ENode(term, children, params))
            node_class.append(cls(row.output))
    classes: list[list[int]] = [[] for _ in range(len(ids))]
    for n, c in enumerate(node_class):
        classes[c].append(n)
    return EGraphView(nodes, node_class, classes, shapes, dtypes, lets, made)


__all__ = ["EGraphView", "ENode", "snapshot"]
