"""Pads a contraction may read through: where its kernel can skip the pad's buffer.

A convolution reads its input through a PAD, and the partition gives that pad a buffer of
its own (`partition.py`: a contraction's operands stay affine loads), written by an
elementwise kernel just before the convolution.  For mobilenet_v2's depthwise
convolutions those pad kernels were 9% of the model's kernel time (2 threads: 423 of
4940 us; 159 us for the 96-channel 112x112 one), a copy of every activation the
convolution then read again.

`folds` marks each contraction that may read the pad's *source* instead (`PadFold`): a
pad of zeros or another finite fill along the last two axes only, of a buffer in the
arena or an input, that this contraction alone reads.  The kernel then also reads the
source (so the source stays alive until it runs), and a variant with `Variant.unpad`
builds the padded rows it needs itself (the CPU's stencil: `backends/cpu/stencil.py`).
Whether that is faster is measured: `schedule.unpad` settles each marked kernel by the
variant the search chose, dropping the pad's kernel where the variant reads the source.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from luminal.compiler.ir import DType, Graph, Op

if TYPE_CHECKING:
    from luminal.compiler.schedule import Kernel


@dataclass(frozen=True)
class PadFold:
    """A contraction operand that is a pad of another buffer (module docstring)."""

    pad: int  # the PAD node: the operand's buffer
    source: int  # the buffer it pads, which an unpadding variant reads instead
    kernel: str  # the kernel writing the pad

    def widths(self, graph: Graph) -> tuple[tuple[int, int], tuple[int, int]]:
        """(top, bottom), (left, right): the pad of the last two axes."""
        widths = graph.nodes[self.pad].arg[0]
        return tuple(widths[-2]), tuple(widths[-1])  # type: ignore[return-value]

    def fill(self, graph: Graph) -> float:
        return float(graph.nodes[self.pad].arg[1])


def folds(graph: Graph, mat: frozenset[int], kernels: Sequence[Kernel]) -> list[Kernel]:
    """`kernels` with each contraction that may read a pad's source marked (`fold`), and
    that source added to what it reads."""
    outputs = {i for _, i in graph.outputs}
    readers: dict[int, list[str]] = {}
    for k in kernels:
        for r in k.reads:
            readers.setdefault(r, []).append(k.name)
    writer = {k.node: k.name for k in kernels}
    out: list[Kernel] = []
    for k in kernels:
        p = k.contraction
        fold = None
        if p is not None:
            for b in dict.fromkeys((p.loops.x[0], p.loops.y[0])):
                fold = _fold(graph, mat, k, b, readers, writer, outputs)
                if fold is not None:
                    break
        if fold is None:
            out.append(k)
        else:
            out.append(dataclasses.replace(k, fold=fold, reads=(*k.reads, fold.source)))
    return out


def _fold(
    graph: Graph,
    mat: frozenset[int],
    k: Kernel,
    b: int,
    readers: dict[int, list[str]],
    writer: dict[int, str],
    outputs: set[int],
) -> PadFold | None:
    nodes = graph.nodes
    if b < 0 or nodes[b].op is not Op.PAD or b in outputs or b not in writer:
        return None
    widths, fill = nodes[b].arg
    src = nodes[b].src[0]
    s = nodes[src]
    if (
        len(widths) < 2
        or any(w != (0, 0) for w in map(tuple, widths[:-2]))
        or src not in mat
        or s.op is Op.CONST
        or s.dtype is not DType.F32
        or nodes[b].dtype is not DType.F32
        or not math.isfinite(float(fill))
        or readers.get(b) != [k.name]
        or src in k.reads
    ):
        return None
    return PadFold(b, src, writer[b])


__all__ = ["PadFold", "folds"]
