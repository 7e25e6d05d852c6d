"""Kernel structure hashes: two kernels with the same hash run the same code on buffers
of the same shapes, so one measurement serves both.

The hash covers the kernel's kind and the IR it computes, from its output back to the
buffers it reads: ops, shapes, dtypes, args, the values of inlined literals, and for each
buffer read its shape, dtype and whether it is an input, weight or intermediate.  It does
not cover node ids, buffer offsets or weight values, so the twelve layers of a
transformer share one hash per kernel position, and the tuning database keyed by it
survives re-exports of the same architecture with new weights.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from luminal.compiler.ir import Op
from luminal.compiler.schedule import Kernel, Schedule


def kernel_hash(sched: Schedule, kernel: Kernel) -> str:
    return hashlib.sha256(describe(sched, kernel).encode()).hexdigest()[:24]


def describe(sched: Schedule, kernel: Kernel) -> str:
    """The canonical text the hash is taken of (readable, for debugging)."""
    g = sched.graph
    mat = sched.part.materialized
    literals = sched.part.literals
    ids: dict[int, int] = {}
    lines: list[str] = [
        f"kind={kernel.kind} inplace={kernel.inplace is not None} dest={kernel.dest.kind}"
    ]

    def visit(i: int, top: bool) -> int:
        if i in ids:
            return ids[i]
        node = g.nodes[i]
        if i in literals:
            value = np.asarray(g.consts[node.arg])
            text = f"lit {node.dtype.value} {node.shape} {hashlib.sha256(value.tobytes()).hexdigest()[:12]}"
        elif i < 0 or ((i in mat or node.op in (Op.INPUT, Op.CONST)) and not top):
            home = sched.homes.get(i)
            text = f"buf {node.dtype.value} {node.shape} {home.kind if home else '?'}"
        else:
            srcs = [visit(s, False) for s in node.src]
            text = f"{node.op.value} {node.dtype.value} {node.shape} {node.arg!r} {srcs}"
        ids[i] = len(lines)
        lines.append(text)
        return ids[i]

    if kernel.reduction is not None:
        # The fused epilogue reads the reduction: describe the reduction as computed here.
        lines.append(f"reduction={visit(kernel.reduction, True)}")
    visit(kernel.node, True)
    if kernel.fold is not None:  # it may read the pad's source: other variants, other code
        f = kernel.fold
        lines.append(f"fold {g.nodes[f.pad].arg!r} of {visit(f.source, False)}")
    for r in kernel.reads:
        if r < 0:  # a packed constant: its layout follows from the plan; shape and dtype
            a = sched.packed[r]
            lines.append(f"packed {a.dtype} {a.shape}")
    return "\n".join(lines)


def unique(sched: Schedule, kernels: Iterable[Kernel]) -> dict[str, list[Kernel]]:
    """Kernels grouped by structure hash, in first-appearance order."""
    groups: dict[str, list[Kernel]] = {}
    for k in kernels:
        groups.setdefault(kernel_hash(sched, k), []).append(k)
    return groups
