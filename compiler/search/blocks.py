"""Repeated blocks: find subgraphs that occur several times (transformer layers, ResNet
blocks) so the e-graph search runs once per kind of block, not once per occurrence.

The graph is cut at its *articulation nodes*: nodes every path from the inputs to the
outputs goes through (a transformer's residual adds, a ResNet block's output), found as
the dominator chain of the outputs.  Between consecutive cuts lies a segment.  A segment's
signature is its structure with the constants it reads abstracted to their shapes and
dtypes (one-element float constants stay as values: a literal is part of the structure),
and with the nodes it reads from outside numbered by first use.  A run of consecutive
segment groups with equal signatures is a block kind with one instance per repetition.

An instance has one entry (the cut before it), one exit (the cut that ends it) and
parameters (the outside nodes it reads, aligned across instances).  Nothing inside an
instance but its exit is read from outside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from luminal.compiler.ir.graph import Graph, Node
from luminal.compiler.ir.ops import Op

#: Smaller repeats are not worth a separate e-graph.
MIN_NODES = 8
_SOURCE = -1


@dataclass(frozen=True)
class Instance:
    entry: int
    exit: int
    nodes: tuple[int, ...]  # internal nodes in topological order (the exit last)
    params: tuple[int, ...]  # outside nodes read (besides the entry), in first-use order


@dataclass(frozen=True)
class Block:
    instances: tuple[Instance, ...]

    def template(self, graph: Graph) -> Graph:
        """The first instance as a graph of its own: the entry becomes input `__entry`,
        constant parameters `__p<k>` (arrays of the first instance, for their types), other
        parameters inputs `__x<k>`, and its exit the output `__exit`."""
        return self.lay_out(graph)[0]

    def occurrence_nodes(self, graph: Graph, index: dict[int, int], k: int) -> dict[int, int]:
        """Template node -> the node of occurrence k it stands for (internal nodes only):
        how a decoded occurrence finds its own nodes' provenance."""
        first = self.instances[0].nodes
        return {index[a]: b for a, b in zip(first, self.instances[k].nodes, strict=False)}

    def lay_out(self, graph: Graph) -> tuple[Graph, dict[int, int]]:
        """`template`, and which template node each node of the first instance became."""
        inst = self.instances[0]
        nodes: list[Node] = []
        index: dict[int, int] = {}
        inputs: list[tuple[str, int]] = []
        consts: dict[str, np.ndarray] = {}

        def add(node: Node) -> int:
            nodes.append(node)
            return len(nodes) - 1

        src = graph.nodes[inst.entry]
        index[inst.entry] = add(Node(Op.INPUT, (), src.shape, src.dtype, "__entry"))
        inputs.append(("__entry", index[inst.entry]))
        for k, p in enumerate(inst.params):
            node = graph.nodes[p]
            if node.op is Op.CONST:
                key = param_key(graph, p, k)
                consts[key] = graph.consts[node.arg]
                index[p] = add(Node(Op.CONST, (), node.shape, node.dtype, key))
            else:
                index[p] = add(Node(Op.INPUT, (), node.shape, node.dtype, f"__x{k}"))
                inputs.append((f"__x{k}", index[p]))
        for i in inst.nodes:
            node = graph.nodes[i]
            for s in node.src:
                if s not in index:  # a one-element literal, part of the structure
                    lit = graph.nodes[s]
                    consts[lit.arg] = graph.consts[lit.arg]
                    index[s] = add(lit)
            index[i] = add(
                Node(node.op, tuple(index[s] for s in node.src), node.shape, node.dtype, node.arg)
            )
        graph_ = Graph(tuple(nodes), tuple(inputs), (("__exit", index[inst.exit]),), consts)
        return graph_, index


def param_key(graph: Graph, node: int, k: int) -> str:
    """Template name of constant parameter k; one-element literals keep their own key."""
    return graph.nodes[node].arg if _literal(graph, node) else f"__p{k}"


def find_blocks(graph: Graph, min_nodes: int = MIN_NODES) -> tuple[Block, ...]:
    dynamic = _dynamic(graph)
    idom = _dominators(graph, dynamic)
    cuts = _cuts(graph, idom)
    if len(cuts) < 3:
        return ()
    owner = _segments(graph, dynamic, idom, cuts)
    users = _users(graph)
    segments: list[list[int]] = [[] for _ in cuts]
    for i, seg in enumerate(owner):
        if seg is not None:
            segments[seg].append(i)
    sigs = [_signature(graph, dynamic, cuts[k], segments[k]) for k in range(len(cuts) - 1)]
    blocks: list[Block] = []
    for start, period, count in _repeats([s[0] for s in sigs], 0, len(sigs)):
        instances = []
        for r in range(count):
            first = start + r * period
            nodes = sorted(i for k in range(first, first + period) for i in segments[k])
            inst = _instance(graph, dynamic, cuts[first], cuts[first + period], nodes, users)
            if inst is not None:
                instances.append(inst)
        keys = {_signature(graph, dynamic, i.entry, list(i.nodes))[0] for i in instances}
        if len(instances) >= 2 and len(keys) == 1 and len(instances[0].nodes) >= min_nodes:
            blocks.append(Block(tuple(instances)))
    return tuple(blocks)


def _dynamic(graph: Graph) -> list[bool]:
    dyn = [False] * len(graph.nodes)
    for i, node in enumerate(graph.nodes):
        dyn[i] = node.op is Op.INPUT or any(dyn[s] for s in node.src)
    return dyn


def _dominators(graph: Graph, dynamic: list[bool]) -> dict[int, int]:
    """Immediate dominator of every dynamic node (and of the virtual sink, key len(nodes))
    from a virtual source feeding every input; in a DAG, the LCA of the predecessors."""
    idom: dict[int, int] = {}
    depth: dict[int, int] = {_SOURCE: 0}

    def lca(a: int, b: int) -> int:
        while a != b:
            if depth[a] < depth[b]:
                a, b = b, a
            a = idom[a]
        return a

    def meet(preds: list[int]) -> int:
        d = preds[0]
        for p in preds[1:]:
            d = lca(d, p)
        return d

    for i, node in enumerate(graph.nodes):
        if dynamic[i]:
            d = meet([s for s in node.src if dynamic[s]] or [_SOURCE])
            idom[i], depth[i] = d, depth[d] + 1
    outs = [i for _, i in graph.outputs if dynamic[i]]
    if outs:
        idom[len(graph.nodes)] = meet(outs)
    return idom


def _cuts(graph: Graph, idom: dict[int, int]) -> list[int]:
    """Articulation nodes in order: the dominators of the virtual sink."""
    chain = []
    d = idom.get(len(graph.nodes), _SOURCE)
    while d != _SOURCE:
        chain.append(d)
        d = idom[d]
    return chain[::-1]


def _segments(
    graph: Graph, dynamic: list[bool], idom: dict[int, int], cuts: list[int]
) -> list[int | None]:
    """Segment k owns the dynamic nodes whose nearest dominating cut is cut k (and cut k+1
    itself)."""
    position = {c: k for k, c in enumerate(cuts)}
    nearest: dict[int, int | None] = {_SOURCE: None}
    owner: list[int | None] = [None] * len(graph.nodes)
    for i in range(len(graph.nodes)):
        if not dynamic[i]:
            continue
        above = nearest[idom[i]]
        nearest[i] = position[i] if i in position else above
        if above is not None and above < len(cuts) - 1:
            owner[i] = above
    return owner


def _users(graph: Graph) -> list[list[int]]:
    users: list[list[int]] = [[] for _ in graph.nodes]
    for i, node in enumerate(graph.nodes):
        for s in node.src:
            users[s].append(i)
    return users


def _literal(graph: Graph, i: int) -> bool:
    node = graph.nodes[i]
    return node.op is Op.CONST and graph.consts[node.arg].size == 1


def _signature(
    graph: Graph, dynamic: list[bool], entry: int, nodes: list[int]
) -> tuple[tuple, list[int], list[int]]:  # type: ignore[type-arg]
    """(structure, outside nodes read in first-use order, all nodes in topological order)
    of a segment.  Constant-only nodes it reads (a broadcast literal, a mask built from
    iota) are part of its structure, copied into every instance that reads them: they cost
    nothing to rebuild and hold the literals the rules fold."""
    inside = set(nodes)
    stack = [s for i in nodes for s in graph.nodes[i].src]
    while stack:
        s = stack.pop()
        if s in inside or s == entry or dynamic[s] or graph.nodes[s].op is Op.CONST:
            continue
        inside.add(s)
        stack.extend(graph.nodes[s].src)
    order = _postorder(graph, max(nodes), inside)
    local = {i: k for k, i in enumerate(order)}
    params: dict[int, int] = {}
    sig = []
    for i in order:
        node = graph.nodes[i]
        refs: list[tuple[object, ...]] = []
        for s in node.src:
            if s == entry:
                refs.append(("entry",))
            elif s in local:
                refs.append(("node", local[s]))
            elif _literal(graph, s):
                value = graph.consts[graph.nodes[s].arg]
                refs.append(("literal", value.shape, value.dtype.str, value.tobytes()))
            else:
                k = params.setdefault(s, len(params))
                other = graph.nodes[s]
                refs.append(("param", k, other.op is Op.CONST, other.shape, other.dtype))
        sig.append((node.op, node.arg, node.shape, node.dtype, tuple(refs)))
    return tuple(sig), list(params), order


def _postorder(graph: Graph, exit_: int, inside: set[int]) -> list[int]:
    """`inside` in the order a depth-first walk from the exit finishes them: the same for
    structurally equal segments, whatever their node numbers."""
    order: list[int] = []
    done: set[int] = set()
    stack = [(exit_, False)]
    while stack:
        i, ready = stack.pop()
        if i in done:
            continue
        if ready:
            done.add(i)
            order.append(i)
            continue
        stack.append((i, True))
        stack.extend(
            (s, False) for s in reversed(graph.nodes[i].src) if s in inside and s not in done
        )
    return order


def _repeats(sigs: list[tuple], lo: int, hi: int) -> list[tuple[int, int, int]]:  # type: ignore[type-arg]
    """Non-overlapping runs (start, period, count >= 2) of equal consecutive groups in
    sigs[lo:hi], the run covering most segments first (the shortest period on a tie: four
    layers are four instances of one layer, not two of two)."""
    best = None
    for period in range(1, (hi - lo) // 2 + 1):
        for start in range(lo, hi - 2 * period + 1):
            count = 1
            while (
                start + (count + 1) * period <= hi
                and sigs[start + count * period : start + (count + 1) * period]
                == sigs[start : start + period]
            ):
                count += 1
            if count >= 2 and (best is None or count * period > best[1] * best[2]):
                best = (start, period, count)
    if best is None:
        return []
    start, period, count = best
    end = start + period * count
    return [*_repeats(sigs, lo, start), best, *_repeats(sigs, end, hi)]


def _instance(
    graph: Graph,
    dynamic: list[bool],
    entry: int,
    exit_: int,
    nodes: list[int],
    users: list[list[int]],
) -> Instance | None:
    inside = set(nodes)
    outputs = {i for _, i in graph.outputs}
    for i in nodes:
        if i != exit_ and (i in outputs or any(u not in inside for u in users[i])):
            return None
    if not nodes or nodes[-1] != exit_:
        return None
    _, params, order = _signature(graph, dynamic, entry, nodes)
    return Instance(entry, exit_, tuple(order), tuple(params))
