"""Schedule: kernels in execution order, where every buffer lives, and the arena plan.

    partition (what is materialized) -> kernels (one per materialized compute node, in
    topological order, each with its kind) -> homes (input, output, weight or arena
    slot) -> lifetimes -> memory plan.

The schedule is backend-neutral: a backend turns each kernel into code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from luminal.compiler.ir import Graph, Op, numel
from luminal.compiler.ir.ops import ELEMENTWISE, REDUCE
from luminal.compiler.schedule import memory
from luminal.compiler.schedule.indexing import row_major, split_loops, trace_load
from luminal.compiler.schedule.partition import Partition, leaves, partition
from luminal.compiler.schedule.symbolic import Lin, Var


@dataclass(frozen=True)
class Place:
    kind: str  # "input" | "output" | "weight" | "arena"
    index: int  # input/output position, or byte offset into the weights or the arena


@dataclass(frozen=True)
class Kernel:
    name: str
    kind: str  # "elementwise" | "reduce" | "contraction" | "scatter"
    node: int  # the IR node whose value the kernel computes
    dest: Place
    reads: tuple[int, ...]  # materialized nodes read
    inplace: int | None = None  # writes over this node's buffer


@dataclass(frozen=True)
class Schedule:
    graph: Graph
    part: Partition
    kernels: tuple[Kernel, ...]
    homes: Mapping[int, Place]
    weights: tuple[tuple[int, int], ...]  # (const node, byte offset in the weights blob)
    weights_bytes: int
    arena_bytes: int
    intermediate_bytes: int  # what the arena buffers would take without reuse

    def to_json(self) -> dict[str, object]:
        kinds: dict[str, int] = {}
        for k in self.kernels:
            kinds[k.kind] = kinds.get(k.kind, 0) + 1
        return {
            "kernels": len(self.kernels),
            "kernel_kinds": kinds,
            "arena_bytes": self.arena_bytes,
            "intermediate_bytes": self.intermediate_bytes,
            "weights_bytes": self.weights_bytes,
            "inplace_kernels": sum(k.inplace is not None for k in self.kernels),
        }


def schedule(graph: Graph) -> Schedule:
    part = partition(graph)
    mat = part.materialized
    nodes = graph.nodes
    homes: dict[int, Place] = {}
    for k, (_, i) in enumerate(graph.inputs):
        homes[i] = Place("input", k)
    weights: list[tuple[int, int]] = []
    woff = 0
    for i, node in enumerate(nodes):
        if node.op is Op.CONST and i in mat:
            weights.append((i, woff))
            homes[i] = Place("weight", woff)
            woff = memory._align(woff + numel(node.shape) * node.dtype.itemsize)

    kernels: list[Kernel] = []
    for i, node in enumerate(nodes):
        if i in mat and node.op not in (Op.INPUT, Op.CONST):
            kernels.append(
                Kernel(
                    f"k{len(kernels)}",
                    _kind(graph, mat, i),
                    i,
                    Place("arena", -1),
                    tuple(leaves(graph, i, mat)),
                )
            )
    # Outputs: the kernel computing an output writes straight into the caller's array;
    # an output that is an input, a constant or a second name for one value gets a copy.
    out_of: dict[int, int] = {}
    by_node = {k.node: n for n, k in enumerate(kernels)}
    for pos, (_, i) in enumerate(graph.outputs):
        if i in by_node and i not in out_of:
            out_of[i] = pos
            n = by_node[i]
            kernels[n] = _with_dest(kernels[n], Place("output", pos))
            homes[i] = Place("output", pos)
        else:
            reads = (i,) if i in mat else tuple(leaves(graph, i, mat))
            kernels.append(
                Kernel(f"k{len(kernels)}", "elementwise", i, Place("output", pos), reads)
            )

    last_read: dict[int, int] = {}
    for n, k in enumerate(kernels):
        for r in k.reads:
            last_read[r] = n
    lifetimes = []
    intermediate = 0
    for n, k in enumerate(kernels):
        if k.dest.kind != "arena":
            continue
        node = nodes[k.node]
        size = numel(node.shape) * node.dtype.itemsize
        intermediate += size
        reuse = _inplace_candidate(graph, mat, k, n, last_read, homes, size)
        if reuse is not None:
            kernels[n] = Kernel(k.name, k.kind, k.node, k.dest, k.reads, reuse)
        lifetimes.append(memory.Lifetime(k.node, size, n, last_read.get(k.node, n), reuse))
        homes[k.node] = Place("arena", -1)
    offsets, arena = memory.plan(lifetimes)
    for node_id, off in offsets.items():
        homes[node_id] = Place("arena", off)
    kernels = [_with_dest(k, homes[k.node]) if k.dest.kind == "arena" else k for k in kernels]
    return Schedule(graph, part, tuple(kernels), homes, tuple(weights), woff, arena, intermediate)


def _with_dest(k: Kernel, dest: Place) -> Kernel:
    return Kernel(k.name, k.kind, k.node, dest, k.reads, k.inplace)


def _kind(graph: Graph, mat: frozenset[int], i: int) -> str:
    node = graph.nodes[i]
    if node.op is Op.SCATTER:
        return "scatter"
    if node.op in REDUCE:
        src = node.src[0]
        if (
            node.op is Op.SUM
            and src not in mat
            and graph.nodes[src].op is Op.MUL
            and graph.nodes[src].dtype.is_float
        ):
            if contraction_loops(graph, mat, i) is not None:
                return "contraction"
        return "reduce"
    return "elementwise"


@dataclass(frozen=True)
class ContractionLoops:
    """A SUM over a MUL of two affine loads, as loops: every variable, which are reduced,
    and the flat offsets into both operands' buffers and the output."""

    loops: tuple[Var, ...]
    reduced: frozenset[Var]
    x: tuple[int, Lin]  # (buffer node, offset)
    y: tuple[int, Lin]
    out: Lin


def contraction_loops(graph: Graph, mat: frozenset[int], i: int) -> ContractionLoops | None:
    node = graph.nodes[i]
    mul = graph.nodes[node.src[0]]
    idx = tuple(Lin.of(Var(f"a{k}", d)) if d > 1 else Lin() for k, d in enumerate(mul.shape))
    loads = [trace_load(graph, mat, s, idx) for s in mul.src]
    if any(ld is None for ld in loads):
        return None
    (xb, xo), (yb, yo) = loads  # type: ignore[misc]
    out = row_major(tuple(Lin() if k in node.arg else e for k, e in enumerate(idx)), node.shape)
    loops = [Var(f"a{k}", d) for k, d in enumerate(mul.shape) if d > 1]
    reduced = frozenset(Var(f"a{k}", d) for k, d in enumerate(mul.shape) if d > 1 and k in node.arg)
    loops, reduced, (xo, yo, out) = split_loops(loops, reduced, [xo, yo, out])
    if not (xo.is_affine and yo.is_affine and out.is_affine):
        return None
    return ContractionLoops(tuple(loops), reduced, (xb, xo), (yb, yo), out)


def _inplace_candidate(
    graph: Graph, mat, k: Kernel, n: int, last_read, homes, size: int
) -> int | None:  # type: ignore[no-untyped-def]
    """An arena input that this elementwise kernel reads only at its own index and that
    dies here can hold the output."""
    if k.kind != "elementwise" or graph.nodes[k.node].op not in ELEMENTWISE:
        return None
    direct = _direct_reads(graph, mat, k.node)
    for r in k.reads:
        node = graph.nodes[r]
        if (
            r in direct
            and last_read.get(r) == n
            and homes.get(r, Place("arena", -1)).kind == "arena"
            and r not in (i for _, i in graph.outputs)
            and numel(node.shape) * node.dtype.itemsize == size
            and node.shape == graph.nodes[k.node].shape
        ):
            return r
    return None


def _direct_reads(graph: Graph, mat: frozenset[int], root: int) -> set[int]:
    """Buffers reached from `root` only through elementwise ops (same index everywhere)."""
    direct: set[int] = set()
    indirect: set[int] = set()
    stack = [(s, True) for s in graph.nodes[root].src]
    seen = set()
    while stack:
        i, ok = stack.pop()
        if (i, ok) in seen:
            continue
        seen.add((i, ok))
        if i in mat:
            (direct if ok else indirect).add(i)
            continue
        node = graph.nodes[i]
        stack.extend((s, ok and node.op in ELEMENTWISE) for s in node.src)
    return direct - indirect


__all__ = ["Kernel", "Partition", "Place", "Schedule", "schedule"]
