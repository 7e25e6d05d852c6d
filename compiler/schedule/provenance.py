"""Which source-model nodes each kernel computes: the ONNX node names `luminal profile`
shows beside a kernel's time, as `trtexec --dumpProfile` names its layers.

The frontend records, per IR node, the source nodes it was lowered from
(`Graph.origins`, kept through the e-graph rewrite by `search/decode.py`).  A kernel
computes its own node and every node inlined into it (views, fused elementwise
producers, a fused reduction and its epilogue), up to the materialized buffers it reads;
its names are theirs, in graph order, each once.
"""

from __future__ import annotations

from luminal.compiler.ir import Op
from luminal.compiler.schedule import Kernel, Schedule


def kernel_origins(sched: Schedule, kernel: Kernel) -> tuple[str, ...]:
    """The source-node names of everything `kernel` computes; () when the frontend kept
    none (a copy of a graph input to an output computes nothing)."""
    g = sched.graph
    mat = sched.part.materialized
    roots = {kernel.node} | ({kernel.reduction} if kernel.reduction is not None else set())
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i in seen or i < 0:
            continue
        seen.add(i)
        node = g.nodes[i]
        if node.op in (Op.INPUT, Op.CONST) or (i in mat and i not in roots):
            seen.discard(i)
            continue
        stack.extend(node.src)
    # A node made of constants only (a broadcast zero, a reshaped bias) is shared by every
    # source node that used it; the node that combines it with data names the kernel.
    dynamic: dict[int, bool] = {}
    for i in sorted(seen):
        dynamic[i] = (
            any(dynamic.get(s, g.nodes[s].op is not Op.CONST) for s in g.nodes[i].src)
            or not g.nodes[i].src
        )
    names: dict[str, None] = {}
    for i in sorted(seen):
        if dynamic[i]:
            names.update(dict.fromkeys(g.origins.get(i, ())))
    return tuple(names)


__all__ = ["kernel_origins"]
