"""What the search may try for one CPU kernel, and what a roofline model needs to know.

`candidates(sched, kernel, features)` lists the legal `Variant`s worth timing for a kernel,
the default first.  `estimate(sched, kernel)` counts the kernel's arithmetic and the bytes
it must move at least once (its buffers), the two inputs of a roofline cost model.
`describe(sched, kernel)` is the kernel's shape in words, for profiles and logs.
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.compiler.backends.cpu.gemm_layout import GemmShape
from luminal.compiler.ir import Op, numel
from luminal.compiler.ir.ops import ELEMENTWISE
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant

#: FLOPs counted for one transcendental (exp2, log2, sin): the polynomial it becomes.
TRANSCENDENTAL_FLOPS = 10

#: Kernels whose work lies within this factor of the parallel threshold get both
#: `parallel` settings as candidates: on either side the measured winner varies by shape
#: and by machine load (2 threads: a claim, or a wake-up of ~5-20 us, against the work).
BORDERLINE = 16


@dataclass(frozen=True)
class Cost:
    flops: int  # floating-point (or integer) operations, multiply-add = 2
    bytes: int  # every buffer read once plus the output written once


def estimate(sched: Schedule, kernel: Kernel) -> Cost:
    g = sched.graph
    node = g.nodes[kernel.node]
    out_elems = numel(node.shape)
    flops = _inlined_ops(sched, kernel.node, stop=kernel.reduction)
    if kernel.kind == "contraction":
        p = kernel.contraction
        assert p is not None
        flops += 2 * _prod(v.size for v in p.loops.loops)
    elif kernel.kind == "reduce":
        red = g.nodes[kernel.reduction if kernel.reduction is not None else kernel.node]
        flops += numel(g.nodes[red.src[0]].shape) + _inlined_ops(sched, red.src[0], None)
    moved = sum(_nbytes(sched, r) for r in set(kernel.reads))
    moved += out_elems * node.dtype.itemsize
    return Cost(int(flops), int(moved))


def describe(sched: Schedule, kernel: Kernel) -> str:
    g = sched.graph
    if kernel.kind == "contraction":
        p = kernel.contraction
        assert p is not None
        shape = GemmShape.of(p)
        batch = f"{shape.batch}x" if shape.batch > 1 else ""
        return f"{batch}[{shape.m}x{shape.k}]@[{shape.k}x{shape.n}]"
    node = g.nodes[kernel.node]
    if kernel.kind == "reduce":
        red = g.nodes[kernel.reduction if kernel.reduction is not None else kernel.node]
        src = g.nodes[red.src[0]]
        return f"{_dims(src.shape)} -> {_dims(red.shape)}"
    return _dims(node.shape)


def candidates(sched: Schedule, kernel: Kernel, features: tuple[str, ...]) -> tuple[Variant, ...]:
    """Legal variants worth measuring for `kernel`, the default first, at most 8.

    Contractions: the register tiles that fit the vector registers (`gemm.tiles`) and
    the shape (no tile wider or taller than the matrix), K blocking when K is long,
    OpenBLAS when the operands are strided matrices (`blas.legal`), and the other
    parallel setting when the work is near the threshold.  Elementwise and reduce
    kernels: parallel on and off when the work is borderline, else only the default."""
    from luminal.compiler.backends.cpu import blas, gemm, simd, winograd
    from luminal.compiler.backends.cpu.codegen import PARALLEL_MIN_WORK

    out: list[Variant] = [DEFAULT]
    work = _work(sched, kernel)
    lo, hi = PARALLEL_MIN_WORK // BORDERLINE, PARALLEL_MIN_WORK * BORDERLINE
    if kernel.kind == "contraction" and kernel.contraction is not None:
        isa = simd.isa_for(features)
        if gemm.supported(sched, kernel, isa):
            shape = GemmShape.of(kernel.contraction)
            default = gemm.default_tile(features)
            for mr, nr in gemm.tiles(features):
                fits = mr <= max(shape.m, default[0]) and nr <= max(
                    -(-shape.n // 16) * 16, default[1]
                )
                if (mr, nr) != default and fits:
                    out.append(Variant(mr=mr, nr=nr))
            out = out[:4]
            if shape.k >= 1024:  # K blocking: never measured faster below (768: -3%)
                out.append(Variant(kc=256))
        if blas.legal(sched, kernel):
            out.append(Variant(impl="blas"))
        if isa.name:
            out += [Variant(impl=i) for i in winograd.TILE if winograd.legal(sched, kernel, i)]
    if kernel.kind != "scatter" and lo <= work <= hi:
        out.append(Variant(parallel=work < PARALLEL_MIN_WORK))
    return tuple(dict.fromkeys(out))[:8]


def _work(sched: Schedule, kernel: Kernel) -> int:
    g = sched.graph
    if kernel.kind == "contraction" and kernel.contraction is not None:
        return _prod(v.size for v in kernel.contraction.loops.loops)
    if kernel.kind == "reduce":
        red = g.nodes[kernel.reduction if kernel.reduction is not None else kernel.node]
        return numel(g.nodes[red.src[0]].shape)
    return numel(g.nodes[kernel.node].shape)


def _inlined_ops(sched: Schedule, root: int, stop: int | None) -> int:
    """Arithmetic done per kernel run by the nodes computed inline from `root` (itself
    included), each counted once per element of its shape; materialized buffers, the
    fused reduction `stop` and other reductions end the walk."""
    g = sched.graph
    mat = sched.part.materialized
    total = 0
    seen: set[int] = set()
    stack = [root]
    while stack:
        i = stack.pop()
        if i in seen or i == stop:
            continue
        seen.add(i)
        node = g.nodes[i]
        if i != root and (i in mat or node.op in (Op.SUM, Op.RMAX)):
            continue
        if node.op in ELEMENTWISE and node.op is not Op.CAST:
            weight = TRANSCENDENTAL_FLOPS if node.op in (Op.EXP2, Op.LOG2, Op.SIN) else 1
            total += weight * numel(node.shape)
        if node.op not in (Op.SUM, Op.RMAX):
            stack.extend(node.src)
    return total


def _nbytes(sched: Schedule, i: int) -> int:
    if i < 0:
        return int(sched.packed[i].nbytes)
    node = sched.graph.nodes[i]
    return numel(node.shape) * node.dtype.itemsize


def _prod(xs) -> int:  # type: ignore[no-untyped-def]
    n = 1
    for x in xs:
        n *= x
    return n


def _dims(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) or "scalar"


__all__ = ["Cost", "candidates", "describe", "estimate"]
