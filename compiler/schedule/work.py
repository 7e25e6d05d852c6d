"""What one kernel of a schedule costs, counted the same way for every backend.

`cost(sched, kernel)` is the kernel's arithmetic (a multiply-add is two operations, a
transcendental `TRANSCENDENTAL_FLOPS`) and the bytes it must move at least once (each
buffer it reads, plus its output): the two inputs of a roofline cost model, and the
figures `luminal compile` and `luminal profile` report.  `loop_work` is the size of its
iteration space, what a backend's parallel threshold compares against.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from luminal.compiler.ir import Op, numel
from luminal.compiler.ir.ops import ELEMENTWISE
from luminal.compiler.schedule import Kernel, Schedule

#: FLOPs counted for one transcendental (exp2, log2, sin): the polynomial it becomes.
TRANSCENDENTAL_FLOPS = 10


@dataclass(frozen=True)
class Cost:
    flops: int  # floating-point (or integer) operations, multiply-add = 2
    bytes: int  # every buffer read once plus the output written once


def cost(sched: Schedule, kernel: Kernel) -> Cost:
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


def loop_work(sched: Schedule, kernel: Kernel) -> int:
    """Iterations of the kernel's loop nest (a contraction's loops, a reduction's input)."""
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


def _prod(xs: Iterable[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n
