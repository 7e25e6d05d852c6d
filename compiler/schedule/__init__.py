"""Schedule: kernels in execution order, where every buffer lives, and the arena plan.

    partition (what is materialized) -> kernels (one per materialized compute node, in
    topological order, each with its kind) -> pads a contraction may read through
    (`unpad.py`) -> homes (input, output, weight or arena slot) -> lifetimes -> memory
    plan.

The schedule is backend-neutral: a backend turns each kernel into code.  After the search,
`orient` and `unpad` settle what the chosen variants decide (a contraction's orientation;
a pad's kernel dropped where its reader reads the source) and lay the weights and the
arena out again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from luminal.compiler.ir import DType, Graph, Op, numel
from luminal.compiler.ir.ops import ELEMENTWISE, REDUCE
from luminal.compiler.schedule import memory
from luminal.compiler.schedule.contraction import (
    ContractionPlan,
    contraction_loops,
    plans,
)
from luminal.compiler.schedule.indexing import loads_of, row_major
from luminal.compiler.schedule.partition import Partition, leaves, partition
from luminal.compiler.schedule.symbolic import Lin, Var
from luminal.compiler.schedule.unpad import PadFold, folds
from luminal.compiler.schedule.variant import DEFAULT, Variant


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
    contraction: ContractionPlan | None = None
    reduction: int | None = None  # set when `node` is an epilogue fused after this reduction
    # Other orientations of `contraction` the search may choose (`Variant.orient` n picks
    # alternatives[n - 1]); a searched schedule has them, `orient` resolves them.
    alternatives: tuple[ContractionPlan, ...] = ()
    # An operand that is a pad this kernel may read the source of (`unpad.py`); until
    # `unpad` settles it, `reads` holds the source too.
    fold: PadFold | None = None

    def oriented(self, orient: int) -> Kernel:
        """This kernel with its contraction in orientation `orient` (0: as planned), and
        the operand buffers that orientation reads."""
        if orient == 0:
            return self
        assert self.contraction is not None and 0 < orient <= len(self.alternatives), (
            f"{self.name}: no orientation {orient}"
        )
        p = self.alternatives[orient - 1]
        old = {self.contraction.loops.x[0], self.contraction.loops.y[0]}
        new = (p.loops.x[0], p.loops.y[0])
        reads = (*(r for r in self.reads if r not in old or r in new), *new)
        return dataclasses.replace(
            self, contraction=p, alternatives=(), reads=tuple(dict.fromkeys(reads))
        )


@dataclass(frozen=True)
class Schedule:
    graph: Graph
    part: Partition
    kernels: tuple[Kernel, ...]
    homes: Mapping[int, Place]
    weights: tuple[
        tuple[int, int], ...
    ]  # (const node or packed id, byte offset in the weights blob)
    weights_bytes: int
    arena_bytes: int
    intermediate_bytes: int  # what the arena buffers would take without reuse
    packed: Mapping[int, np.ndarray] = dataclasses.field(default_factory=dict)  # id < 0

    def dtype(self, i: int) -> DType:
        """Element type of a buffer: an IR node, or (id < 0) a packed constant."""
        return DType.from_numpy(self.packed[i].dtype) if i < 0 else self.graph.nodes[i].dtype

    def weight_array(self, i: int) -> np.ndarray:
        return self.packed[i] if i < 0 else self.graph.consts[self.graph.nodes[i].arg]

    def weights_blob(self) -> bytes:
        """Every constant a kernel reads, at its offset in the weights blob (64-byte
        aligned): what every backend stores as `weights.bin`."""
        blob = bytearray(self.weights_bytes)
        for node, offset in self.weights:
            data = np.ascontiguousarray(self.weight_array(node)).tobytes()
            blob[offset : offset + len(data)] = data
        return bytes(blob)

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
            "fused_epilogues": sum(k.reduction is not None for k in self.kernels),
        }


def schedule(graph: Graph, alternatives: bool = False) -> Schedule:
    """The schedule of `graph`; with `alternatives`, contraction kernels also carry their
    other orientations (and the weights they read), for the search to measure; `orient`
    then fixes one per kernel."""
    part = partition(graph)
    mat = part.materialized
    nodes = graph.nodes
    homes: dict[int, Place] = {}
    for k, (_, i) in enumerate(graph.inputs):
        homes[i] = Place("input", k)

    kernels: list[Kernel] = []
    packed: dict[int, np.ndarray] = {}  # negative pseudo ids -> constants re-laid out
    for i, node in enumerate(nodes):
        if i in mat and node.op not in (Op.INPUT, Op.CONST):
            kernel = Kernel(
                f"k{len(kernels)}",
                _kind(graph, i),
                i,
                Place("arena", -1),
                tuple(leaves(graph, i, mat)),
            )
            if kernel.kind == "reduce":
                kernel = _as_contraction(graph, mat, kernel, packed, 3 if alternatives else 1)
            kernels.append(kernel)
    named = len(kernels)  # k0..k{named-1} taken; fusion keeps names, so new ones count on
    kernels = fuse_epilogues(graph, mat, kernels)
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
            kernels.append(Kernel(f"k{named}", "elementwise", i, Place("output", pos), reads))
            named += 1

    kernels = folds(graph, mat, kernels)
    weights, woff = _weights(graph, kernels, packed)
    homes.update({i: Place("weight", off) for i, off in weights})
    kernels, arena, intermediate = _placed(graph, mat, kernels, homes)
    return Schedule(
        graph, part, tuple(kernels), homes, tuple(weights), woff, arena, intermediate, packed
    )


def _placed(
    graph: Graph, mat: frozenset[int], kernels: list[Kernel], homes: dict[int, Place]
) -> tuple[list[Kernel], int, int]:
    """The arena plan for what `kernels` read: each intermediate lives from the kernel
    writing it to the last reading it, written in place where it may be.  Adds the arena
    offsets to `homes`; returns the kernels with their destinations, the arena's bytes and
    what its buffers would take without reuse."""
    nodes = graph.nodes
    last_read: dict[int, int] = {}
    for n, k in enumerate(kernels):
        for r in k.reads:
            last_read[r] = n
    lifetimes = []
    intermediate = 0
    kernels = list(kernels)
    for n, k in enumerate(kernels):
        if k.dest.kind != "arena":
            continue
        node = nodes[k.node]
        size = numel(node.shape) * node.dtype.itemsize
        intermediate += size
        reuse = _inplace_candidate(graph, mat, k, n, last_read, homes, size)
        kernels[n] = dataclasses.replace(k, inplace=reuse)
        lifetimes.append(memory.Lifetime(k.node, size, n, last_read.get(k.node, n), reuse))
        homes[k.node] = Place("arena", -1)
    offsets, arena = memory.plan(lifetimes)
    for node_id, off in offsets.items():
        homes[node_id] = Place("arena", off)
    kernels = [_with_dest(k, homes[k.node]) if k.dest.kind == "arena" else k for k in kernels]
    return kernels, arena, intermediate


def _as_contraction(
    graph: Graph, mat: frozenset[int], k: Kernel, packed: dict[int, np.ndarray], most: int
) -> Kernel:
    """A SUM over a MUL of two affine loads becomes a blocked contraction; a constant
    operand that is read with a stride along the vectorized loop is packed.  Up to `most`
    orientations are planned: the first is the kernel's, the rest its alternatives."""
    node = graph.nodes[k.node]
    src = node.src[0]
    if (
        node.op is not Op.SUM
        or src in mat
        or graph.nodes[src].op is not Op.MUL
        or not (graph.nodes[src].dtype.is_float or graph.nodes[src].dtype is DType.I32)
    ):
        return k
    cl = contraction_loops(graph, mat, k.node)
    found = plans(graph, cl, most) if cl is not None else ()
    if not found:
        return k
    reads = k.reads
    if found[0].packed is not None:  # the packed copy replaces the constant it was made from
        source = found[0].loops.y[0]
        found = tuple(_packed_as(p, packed) for p in found)
        p = found[0]
        reads = (*(r for r in reads if r != source or r == p.loops.x[0]), p.loops.y[0])
    else:
        found = tuple(_packed_as(p, packed) for p in found)
    return dataclasses.replace(
        k, kind="contraction", reads=reads, contraction=found[0], alternatives=found[1:]
    )


def _packed_as(p: ContractionPlan, packed: dict[int, np.ndarray]) -> ContractionPlan:
    """`p` reading its packed constant (if any) under a new pseudo id in `packed`."""
    if p.packed is None:
        return p
    pseudo = -1 - len(packed)
    packed[pseudo] = p.packed
    return dataclasses.replace(p, loops=dataclasses.replace(p.loops, y=(pseudo, p.loops.y[1])))


def _weights(
    graph: Graph, kernels: list[Kernel], packed: Mapping[int, np.ndarray]
) -> tuple[list[tuple[int, int]], int]:
    """Every constant some kernel (or an orientation it may take) reads, packed copies
    included, at 64-byte aligned offsets: ((id, offset), ...) and the total bytes."""
    nodes = graph.nodes
    used = {
        r
        for k in kernels
        for view in (k, *(k.oriented(n + 1) for n in range(len(k.alternatives))))
        for r in view.reads
        if r < 0 or nodes[r].op is Op.CONST
    }
    weights: list[tuple[int, int]] = []
    woff = 0
    for i in sorted(used, key=abs):
        weights.append((i, woff))
        woff = memory.align(woff + _nbytes(graph, packed, i))
    return weights, woff


def orient(sched: Schedule, variants: Mapping[str, Variant]) -> tuple[Schedule, dict[str, Variant]]:
    """The schedule with each contraction in the orientation its variant chose (the
    default where none did), alternatives dropped and the weights laid out anew for what
    is read; and the variants without the orientation, which the schedule now holds."""
    kernels = [
        dataclasses.replace(k.oriented(variants.get(k.name, DEFAULT).orient), alternatives=())
        for k in sched.kernels
    ]
    weights, woff = _weights(sched.graph, kernels, sched.packed)
    kept = {i for i, _ in weights}
    homes = {i: h for i, h in sched.homes.items() if h.kind != "weight"}
    homes.update({i: Place("weight", off) for i, off in weights})
    out = dataclasses.replace(
        sched,
        kernels=tuple(kernels),
        homes=homes,
        weights=tuple(weights),
        weights_bytes=woff,
        packed={i: a for i, a in sched.packed.items() if i in kept},
    )
    plain = {
        name: dataclasses.replace(v, orient=0)
        for name, v in variants.items()
        if dataclasses.replace(v, orient=0) != DEFAULT
    }
    return out, plain


def unpad(sched: Schedule, variants: Mapping[str, Variant]) -> tuple[Schedule, dict[str, Variant]]:
    """Each kernel that may read a pad's source (`Kernel.fold`) settled by its variant:
    where the variant reads the source (`Variant.unpad`), the pad's kernel is dropped;
    elsewhere the kernel reads the pad as planned and no longer the source.  The arena is
    planned anew for what the kernels then read.  Returns the variants of the kernels
    left."""
    if all(k.fold is None for k in sched.kernels):
        return sched, dict(variants)
    dropped: set[str] = set()
    kernels: list[Kernel] = []
    for k in sched.kernels:
        f = k.fold
        if f is not None and variants.get(k.name, DEFAULT).unpad:
            dropped.add(f.kernel)
            k = dataclasses.replace(k, reads=tuple(r for r in k.reads if r != f.pad))
        elif f is not None:
            k = dataclasses.replace(k, fold=None, reads=tuple(r for r in k.reads if r != f.source))
        kernels.append(k)
    kernels = [k for k in kernels if k.name not in dropped]
    homes = {i: h for i, h in sched.homes.items() if h.kind != "arena"}
    placed, arena, intermediate = _placed(sched.graph, sched.part.materialized, kernels, homes)
    out = dataclasses.replace(
        sched,
        kernels=tuple(placed),
        homes=homes,
        arena_bytes=arena,
        intermediate_bytes=intermediate,
    )
    return out, {n: v for n, v in variants.items() if n not in dropped}


def settled(
    sched: Schedule, variants: Mapping[str, Variant]
) -> tuple[Schedule, dict[str, Variant]]:
    """The schedule as the chosen variants run it (`orient`, then `unpad`), and those
    variants: what a compile writes, and what `luminal profile` rebuilds an artifact as."""
    sched, plain = orient(sched, variants)
    return unpad(sched, plain)


def _nbytes(graph: Graph, packed: Mapping[int, np.ndarray], i: int) -> int:
    if i < 0:
        return int(packed[i].nbytes)
    node = graph.nodes[i]
    return numel(node.shape) * node.dtype.itemsize


def fuse_epilogues(graph: Graph, mat: frozenset[int], kernels: list[Kernel]) -> list[Kernel]:
    """Fold an elementwise kernel into the reduction before it when it is the reduction's
    only reader and reads it only at its own element: the reduction's result then goes
    through the epilogue (bias, activation, residual add, ...) in registers and its buffer
    disappears.  Reductions that are graph outputs keep their buffer."""
    readers: dict[int, list[int]] = {}
    for n, k in enumerate(kernels):
        for r in k.reads:
            readers.setdefault(r, []).append(n)
    outputs = {i for _, i in graph.outputs}
    fused: dict[int, Kernel] = {}
    dropped: set[int] = set()
    for n, k in enumerate(kernels):
        if k.kind not in ("reduce", "contraction") or k.node in outputs:
            continue
        users = readers.get(k.node, [])
        if len(users) != 1 or kernels[users[0]].kind != "elementwise" or users[0] in fused:
            continue
        e = kernels[users[0]]
        enode, rnode = graph.nodes[e.node], graph.nodes[k.node]
        if numel(enode.shape) != numel(rnode.shape):
            continue
        idx = tuple(Lin.of(Var(f"e{j}", d)) if d > 1 else Lin() for j, d in enumerate(enode.shape))
        loads = loads_of(graph, mat, e.node, k.node, idx)
        if not loads or any(off != row_major(idx, enode.shape) for off in loads):
            continue
        reads = tuple(dict.fromkeys((*k.reads, *(r for r in e.reads if r != k.node))))
        fused[users[0]] = dataclasses.replace(
            k, name=e.name, node=e.node, reads=reads, reduction=k.node
        )
        dropped.add(n)
    return [fused.get(n, k) for n, k in enumerate(kernels) if n not in dropped]


def _with_dest(k: Kernel, dest: Place) -> Kernel:
    return dataclasses.replace(k, dest=dest)


def _kind(graph: Graph, i: int) -> str:
    node = graph.nodes[i]
    if node.op is Op.SCATTER:
        return "scatter"
    return "reduce" if node.op in REDUCE else "elementwise"


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


__all__ = [
    "Kernel",
    "PadFold",
    "Partition",
    "Place",
    "Schedule",
    "orient",
    "schedule",
    "settled",
    "unpad",
]
