"""The block-aware driver behind `saturate.rewrite`: one e-graph per kind of repeated
block (its first occurrence, constants abstracted) plus one for the rest of the graph,
saturated in turn, then decoded into one GraphBuilder.

In the outer e-graph each block occurrence is an opaque leaf `__b<kind>_<k>`; when the
decoder reaches it, it decodes the block's chosen template with that occurrence's entry,
parameters and constant arrays.  Constant-only subterms of a template (a weight times a
literal) fold per occurrence, with that occurrence's weights.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from luminal.compiler.ir.builder import GraphBuilder, Value
from luminal.compiler.ir.graph import Graph
from luminal.compiler.ir.ops import Op
from luminal.compiler.search.blocks import Block, find_blocks, param_key
from luminal.compiler.search.choice import Choice, choose
from luminal.compiler.search.decode import Decoder
from luminal.compiler.search.encoder import Encoding, encode
from luminal.compiler.search.fold import Folded
from luminal.compiler.search.language import Term
from luminal.compiler.search.rulesets import Rule
from luminal.compiler.search.saturate import RunStats, saturate
from luminal.compiler.search.saturation import STOP_REASONS, SaturationBudget
from luminal.compiler.search.snapshot import EGraphView, snapshot

#: Share of the time budget for saturation; the rest is for extraction and decoding.
SATURATION_SHARE = 0.75
#: When several families added alternatives to one e-class, the chosen node is credited to
#: the most specific of them.
CREDIT_ORDER = ("fusion", "contraction", "algebra")


@dataclass
class PlanResult:
    graph: Graph
    stats: RunStats
    blocks: int
    block_instances: int
    applied: dict[str, int]


@dataclass
class _Solved:
    encoding: Encoding
    view: EGraphView
    choice: Choice
    stats: RunStats


def run(
    graph: Graph, rules: Sequence[Rule], budget: SaturationBudget, deadline: float
) -> PlanResult:
    blocks = find_blocks(graph)
    exits = {
        inst.exit: f"__b{b}_{k}"
        for b, block in enumerate(blocks)
        for k, inst in enumerate(block.instances)
    }
    keep = tuple(
        dict.fromkeys(
            n
            for block in blocks
            for inst in block.instances
            for n in (inst.entry, *inst.params)
            if graph.nodes[n].op is not Op.CONST
        )
    )
    laid_out = [b.lay_out(graph) for b in blocks]
    encodings = [encode(template) for template, _ in laid_out]
    encodings.append(encode(graph, exits, keep))
    solved = _saturate_all(encodings, rules, budget, deadline, {len(blocks): keep})
    *templates, outer = solved

    builder = GraphBuilder()
    inputs = {s.name: builder.input(s.name, s.shape, s.dtype) for s in graph.input_specs()}
    where = {
        name: (b, k)
        for b, block in enumerate(blocks)
        for k, name in enumerate(exits[inst.exit] for inst in block.instances)
    }

    def resolve(name: str) -> Value | Folded:
        if name in inputs:
            return inputs[name]
        b, k = where[name]
        return _instantiate(
            graph, blocks[b], k, templates[b], laid_out[b][1], outer_decoder, builder
        )

    outer_origins = class_origins(outer.view, graph, {i: i for i in range(len(graph.nodes))})
    outer_decoder = Decoder(builder, outer.view, outer.choice, resolve, graph.consts, outer_origins)
    result = builder.build(
        {
            out: outer_decoder.emit(outer_decoder.let(let))
            for let, out in outer.encoding.roots.items()
        }
    )
    applied = _applied(outer)
    for block, solved_block in zip(blocks, templates, strict=True):
        for family, n in _applied(solved_block).items():
            applied[family] = applied.get(family, 0) + n * len(block.instances)
    return PlanResult(
        result,
        _merge([s.stats for s in solved]),
        len(blocks),
        sum(len(b.instances) for b in blocks),
        applied,
    )


def _saturate_all(
    encodings: list[Encoding],
    rules: Sequence[Rule],
    budget: SaturationBudget,
    deadline: float,
    keep: dict[int, tuple[int, ...]],
) -> list[_Solved]:
    """Saturate each e-graph with a share of the time and e-node budgets by its size."""
    now = time.perf_counter()
    end = now + (deadline - now) * SATURATION_SHARE
    sizes = [max(len(e.original), 1) for e in encodings]
    total = sum(sizes)
    solved = []
    for k, (enc, size) in enumerate(zip(encodings, sizes, strict=True)):
        now = time.perf_counter()
        share = size / sum(sizes[k:])
        mine = SaturationBudget(
            budget.iterations, max(1, budget.enodes * size // total), budget.seconds
        )
        stats = saturate(enc.egraph, rules, mine, now + max(0.0, end - now) * share)
        view = snapshot(enc.egraph)
        roots = [view.lets[let] for let in enc.roots]
        roots += [view.lets[f"n{i}"] for i in keep.get(k, ())]
        solved.append(_Solved(enc, view, choose(view, roots), stats))
    return solved


def _instantiate(
    graph: Graph,
    block: Block,
    k: int,
    template: _Solved,
    index: dict[int, int],
    outer: Decoder,
    builder: GraphBuilder,
) -> Value:
    """Occurrence k of a block, built from the block's chosen template (its nodes named
    after occurrence k's own source nodes)."""
    inst = block.instances[k]
    bindings: dict[str, Value | Folded] = {
        "__entry": outer.emit(outer.value(_let(outer, inst.entry)))
    }
    consts = dict(template.encoding.graph.consts)
    for j, p in enumerate(inst.params):
        node = graph.nodes[p]
        if node.op is Op.CONST:
            consts[param_key(graph, block.instances[0].params[j], j)] = graph.consts[node.arg]
        else:
            bindings[f"__x{j}"] = outer.value(_let(outer, p))
    origins = class_origins(template.view, graph, block.occurrence_nodes(graph, index, k))
    decoder = Decoder(
        builder, template.view, template.choice, bindings.__getitem__, consts, origins
    )
    return decoder.emit(decoder.let("__out0"))


def class_origins(
    view: EGraphView, graph: Graph, nodes: dict[int, int]
) -> dict[int, tuple[str, ...]]:
    """E-class -> the source-node names of the graph nodes merged into it; `nodes` maps
    each encoded node to the node of `graph` whose provenance it carries."""
    out: dict[int, tuple[str, ...]] = {}
    for encoded, node in nodes.items():
        names = graph.origins.get(node)
        cls = view.lets.get(f"n{encoded}")
        if names and cls is not None:
            had = out.get(cls, ())
            out[cls] = (*had, *(n for n in names if n not in had))
    return out


def _let(decoder: Decoder, node: int) -> int:
    return decoder.view.lets[f"n{node}"]


def _applied(solved: _Solved) -> dict[str, int]:
    view = solved.view
    original = {
        (ctor, tuple(view.lets[f"n{s}"] for s in srcs), view.lets[f"n{i}"])
        for i, ctor, srcs in solved.encoding.original
    }
    roots = [view.lets[let] for let in solved.encoding.roots]
    return credit(view, solved.choice, original, view.made, roots)


def credit(
    view: EGraphView,
    choice: Choice,
    original: set[tuple[Term, tuple[int, ...], int]],
    made: dict[int, set[str]],
    roots: Sequence[int],
) -> dict[str, int]:
    """Count chosen e-nodes that are not in the original graph, by the family that made an
    alternative for their e-class (inherited from the nearest such ancestor)."""
    counts: dict[str, int] = {}
    seen: set[int] = set()
    stack: list[tuple[int, str | None]] = [(r, None) for r in roots]
    while stack:
        cls, inherited = stack.pop()
        if cls in seen or cls not in choice.best:
            continue
        seen.add(cls)
        node = view.nodes[choice.best[cls]]
        tags = made.get(cls, set())
        family = next((f for f in CREDIT_ORDER if f in tags), inherited)
        if (node.op, node.children, cls) not in original and family is not None:
            counts[family] = counts.get(family, 0) + 1
        stack.extend((c, family) for c in node.children)
    return counts


def _merge(all_stats: list[RunStats]) -> RunStats:
    merged = RunStats()
    merged.iterations = max((s.iterations for s in all_stats), default=0)
    merged.enodes = sum(s.enodes for s in all_stats)
    merged.stop_reason = max(
        (s.stop_reason for s in all_stats), key=STOP_REASONS.index, default="saturated"
    )
    for s in all_stats:
        for key, n in s.matches.items():
            merged.matches[key] = merged.matches.get(key, 0) + n
        for key, t in s.seconds.items():
            merged.seconds[key] = merged.seconds.get(key, 0.0) + t
    return merged
