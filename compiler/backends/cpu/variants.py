"""What the search may try for one CPU kernel.

`candidates(sched, kernel, features)` lists the legal `Variant`s worth timing for a kernel,
the default first.  `describe(sched, kernel)` is the kernel's shape in words, for
profiles and logs.  What a kernel costs is counted backend-neutrally (`schedule/work.py`).
"""

from __future__ import annotations

import dataclasses

from luminal.compiler.backends.cpu.gemm_layout import GemmShape
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant
from luminal.compiler.schedule.work import loop_work

#: Kernels whose work lies within this factor of the parallel threshold get both
#: `parallel` settings as candidates: on either side the measured winner varies by shape
#: and by machine load (2 threads: a claim, or a wake-up of ~5-20 us, against the work).
BORDERLINE = 16


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
    """Legal variants worth measuring for `kernel`, the default first, at most 8 (two
    more per planned orientation) besides the input twins of its tiles, which the
    search measures only beside their twin (`search.kernels._input_twins`).

    Contractions: the other orientations the schedule planned (`Kernel.alternatives`),
    the register tiles that fit the vector registers (`gemm.tiles`) and
    the shape (no tile wider or taller than the matrix), K blocking when K is long,
    the integer kernel's tiles and the portable loop for an i32 contraction of i16
    operands (`igemm.legal`, the default there), the stencil kernel for a depthwise (or grouped)
    convolution's shape (`stencil.legal`; in half-width vectors too for rows shorter than
    one vector), OpenBLAS when the operands are strided matrices (`blas.legal`), the
    other parallel setting when the work is near the threshold, and each tile building a
    convolution's padded input itself (`gemm.unpad_legal`) or packing a strided 1x1
    convolution's input (`gemm.compact_legal`), and Winograd building its tile rows
    from the pad's source (`winograd.unpad_legal`).  Elementwise and reduce
    kernels: parallel on and off when the work is borderline, and an elementwise kernel
    reading a buffer transposed also in square tiles (`codegen.tiles_legal`)."""
    from luminal.compiler.backends.cpu import blas, codegen, gemm, igemm, simd, stencil, winograd
    from luminal.compiler.backends.cpu.codegen import PARALLEL_MIN_WORK

    out: list[Variant] = [DEFAULT]
    twins: list[Variant] = []  # building the input itself: measured beside their twin
    work = loop_work(sched, kernel)
    lo, hi = PARALLEL_MIN_WORK // BORDERLINE, PARALLEL_MIN_WORK * BORDERLINE
    if kernel.kind == "contraction" and kernel.contraction is not None:
        isa = simd.isa_for(features)
        # the other orientations first (so the cap below never drops them), each in the
        # default tile and the best-fitting other one
        for o in range(1, len(kernel.alternatives) + 1):
            view = kernel.oriented(o)
            if gemm.supported(sched, view, isa):
                out += [Variant(orient=o), *_tiles(view, features, o)[:1]]
        if gemm.supported(sched, kernel, isa):
            out += _tiles(kernel, features, 0)
            out = out[: 4 + 2 * len(kernel.alternatives)]
            if (
                GemmShape.of(kernel.contraction).k >= 1024
            ):  # K blocking: never measured faster below (768: -3%)
                out.append(Variant(kc=256))
        if igemm.legal(sched, kernel, isa.name):
            # the integer kernel (the default) in its other tiles, and the portable loop
            shape = GemmShape.of(kernel.contraction)
            out += [
                Variant(mr=mr, nr=nr)
                for mr, nr in igemm.TILES[1:]
                if mr <= max(shape.m, igemm.DEFAULT_TILE[0])
                and nr <= max(-(-shape.n // 8) * 8, igemm.DEFAULT_TILE[1])
            ]
            out.append(Variant(impl="loop"))
        unpad = stencil.unpad_legal(sched, kernel, isa)  # its pad's rows built per item
        split = stencil.compact_legal(sched, kernel, isa)  # and split by parity (stride 2)
        for impl, legal in (
            (stencil.IMPL, stencil.legal(sched, kernel, isa)),
            (stencil.HALF_IMPL, stencil.half_legal(sched, kernel, isa)),
        ):
            if legal:
                out.append(Variant(impl=impl))
                if unpad:
                    out.append(Variant(impl=impl, unpad=True))
                if split:
                    out.append(Variant(impl=impl, unpad=True, compact=True))
        if blas.legal(sched, kernel):
            out.append(Variant(impl="blas"))
        if isa.name:
            for impl in winograd.TILE:
                if winograd.legal(sched, kernel, impl):
                    out.append(Variant(impl=impl))
                    if winograd.unpad_legal(sched, kernel, impl):
                        twins.append(Variant(impl=impl, unpad=True))
        # the generated kernel building its padded input, or packing a strided 1x1
        # convolution's input, in each tile of the kernel as planned (beyond the cap:
        # the search measures the twins of the tiles it measures, `search.kernels`)
        way = (
            {"unpad": True}
            if gemm.unpad_legal(sched, kernel, features)
            else {"compact": True}
            if gemm.compact_legal(sched, kernel, features)
            else None
        )
        if way is not None:
            twins += [
                dataclasses.replace(v, **way) for v in (DEFAULT, *_tiles(kernel, features, 0))
            ]
    if kernel.kind == "elementwise" and codegen.tiles_legal(sched, kernel):
        out.append(Variant(impl=codegen.TILED_IMPL))
    if kernel.kind != "scatter" and lo <= work <= hi:
        out.append(Variant(parallel=work < PARALLEL_MIN_WORK))
    capped = tuple(dict.fromkeys(out))[: 8 + 2 * len(kernel.alternatives)]
    return tuple(dict.fromkeys((*capped, *twins)))


def _tiles(kernel: Kernel, features: tuple[str, ...], orient: int) -> list[Variant]:
    """The register tiles other than the default that fit the contraction's shape."""
    from luminal.compiler.backends.cpu import gemm

    assert kernel.contraction is not None
    shape = GemmShape.of(kernel.contraction)
    default = gemm.default_tile(features)
    return [
        Variant(mr=mr, nr=nr, orient=orient)
        for mr, nr in gemm.tiles(features)
        if (mr, nr) != default
        and mr <= max(shape.m, default[0])
        and nr <= max(-(-shape.n // 16) * 16, default[1])
    ]


def _dims(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) or "scalar"


__all__ = ["candidates", "describe"]
