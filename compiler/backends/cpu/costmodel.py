"""The CPU's roofline cost model, calibrated on this machine, that ranks kernel variants.

    seconds = max(flops / (peak * efficiency), bytes / bandwidth) / threads + overheads

`peak` (FMA throughput of one core) and `bandwidth` (a streaming copy) are measured once
per device by `calibrate` with a small C program built by the same toolchain as models,
and kept in the tuning database.  `efficiency` says how much of the peak a variant can
reach (register tile size, K blocking, a library GEMM); it only has to rank variants,
since the best few are then timed, and the search reports how well the ranking agreed
with the timings (Kendall's tau per kernel) so the model can be improved on evidence.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from luminal.compiler.backends.cpu import stencil, toolchain
from luminal.compiler.backends.cpu.native import open_library
from luminal.compiler.ir import numel
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import Variant
from luminal.compiler.schedule.work import cost
from luminal.compiler.search.tuner import Machine


@dataclass(frozen=True)
class Work:
    flops: float
    bytes: float
    parallel_default: bool  # the backend's threshold would run it in parallel


def work(sched: Schedule, kernel: Kernel) -> Work:
    """FLOPs and bytes of one call (`schedule.work.cost`), and whether the code
    generator's threshold would run the kernel in parallel."""
    from luminal.compiler.backends.cpu.codegen import PARALLEL_MIN_WORK

    c = cost(sched, kernel)
    return Work(float(c.flops), float(c.bytes), c.flops >= PARALLEL_MIN_WORK)


#: The reduction length at which a strided store of the output costs as much as the
#: multiply-adds it follows: mobilenet_v2's 1x1 layers (K = 16-32) ran 10x faster stored
#: along the output row than along the output channels; 3x3 layers (K >= 288) alike.
SCATTER_K = 64


def efficiency(
    variant: Variant, kernel: Kernel, work_: Work, default_tile: tuple[int, int]
) -> float:
    """Fraction of the FMA peak a variant reaches: a rank, not a promise.

    Generated contractions: the register tile's share of useful lanes (a 49-row output
    in 12-row tiles computes 60 rows), less when the tile needs more accumulators than
    the register file holds; K blocking costs a little (it never won on the suite).
    A library GEMM: measured 10-30% behind the generated kernels on every suite shape,
    and far behind on small ones (packing overheads)."""
    if kernel.contraction is None:
        return 0.25  # elementwise/reduce code: vectorizable, rarely FMA-bound
    if variant.impl == "blas":
        return 0.6 if work_.flops > 2e6 else 0.25
    if variant.impl == "winograd":
        # F(2x2, 3x3): 16 of the direct convolution's 36 multiply-adds; with its
        # transforms measured 1.25-1.5x the generated code on cnn's 3x3 layers.
        return 0.9 * 1.3
    if variant.impl == "winograd4":
        # F(4x4, 3x3): 36 multiply-adds per 16 outputs (2.25 per output, F(2x2): 4).
        return 0.9 * 1.4
    if variant.impl in stencil.IMPLS:  # full or half width: the same loop, measured apart
        lay = stencil.StencilLayout.of(kernel.contraction)
        if lay is not None and lay.chan is not None:
            # A grouped convolution's 8 channels per group sharing each load: 1.4-2.1x
            # the generated GEMM on regnet's 3x3 layers (its panels are reused 8 times).
            return 0.95
        # A depthwise convolution's product, vectorized along the output row: measured
        # 5-25 GFLOP/s on mobilenet_v2's 3x3 layers where the GEMM kernel ran at 0.1-3.
        return 0.3
    if variant.impl != "generated":
        return 0.7  # another algorithm: measured, not modelled
    from luminal.compiler.backends.cpu.gemm_layout import GemmShape

    shape = GemmShape.of(kernel.contraction)
    mr, nr = variant.mr or default_tile[0], variant.nr or default_tile[1]
    lanes = 16 if default_tile[1] % 16 == 0 and default_tile[1] >= 32 else 8
    registers = 32 if lanes == 16 else 16
    useful = (shape.m / (-(-shape.m // mr) * mr)) * (shape.n / (-(-shape.n // nr) * nr))
    eff = 0.9 * useful
    if mr * nr // lanes + nr // lanes + 1 > registers:
        eff *= 0.5  # accumulators spill
    if variant.kc is not None:
        eff *= 0.97
    p = kernel.contraction
    if abs(p.loops.out.coeff(p.n)) != 1:
        # The tile's rows are stored with a stride (a convolution with n along the output
        # channels): a cache line per element, paid once per 2K FLOPs; a quarter of that
        # when the tile's columns are contiguous instead (m along the output row).
        along_m = p.m is not None and abs(p.loops.out.coeff(p.m)) == 1
        eff *= shape.k / (shape.k + (SCATTER_K / 4 if along_m else SCATTER_K))
    return max(eff, 0.05)


def estimate(
    machine: Machine,
    sched: Schedule,
    kernel: Kernel,
    variant: Variant,
    default_tile: tuple[int, int] = (8, 32),
) -> float:
    w = work(sched, kernel)
    compute = w.flops / (machine.peak_gflops * 1e9 * efficiency(variant, kernel, w, default_tile))
    memory = w.bytes / (machine.bandwidth_gbs * 1e9)
    seconds = max(compute, memory)
    parallel = variant.parallel if variant.parallel is not None else w.parallel_default
    if variant.impl == "blas":
        parallel = True  # the library threads itself above its own threshold
    if parallel and machine.cores > 1:
        seconds = seconds / machine.cores + machine.parallel_overhead_s
    if kernel.fold is not None:
        # The source copied into the padded input: by the pad's kernel, timed with the
        # variant (`bench.timed_with_pad`), or by an unpadding variant itself.  Every
        # variant pays it alike, so an unpadding variant ranks beside its twin that reads
        # the pad, and the search measures it where that twin is measured
        # (`search.kernels`): it adds a measurement, never takes a tile's place.
        g = sched.graph
        moved = sum(numel(g.nodes[i].shape) * 4 for i in (kernel.fold.pad, kernel.fold.source))
        seconds += moved / (machine.bandwidth_gbs * 1e9 * machine.cores) + machine.call_overhead_s
    return seconds + machine.call_overhead_s


_CALIBRATE_C = r"""
#include <stdint.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
/* 12 independent FMA chains as wide as the widest vector the kernels use: enough to
   cover FMA latency on current x86 cores.  8-wide chains on a core with two 512-bit FMA
   units (Intel's AVX-512 server cores) measured half its peak: 139 GFLOP/s of 207. */
#ifdef __AVX512F__
#define LANES 16
#else
#define LANES 8
#endif
typedef float lum_cal_v __attribute__((vector_size(LANES * 4)));
double lum_fma_gflops(int64_t iters) {
    lum_cal_v acc[12];  /* distinct starts: equal chains may be folded into one */
    for (int r = 0; r < 12; r++) acc[r] = (lum_cal_v){0} + (float)r;
    const lum_cal_v a = (lum_cal_v){0} + 1.0000001f, b = (lum_cal_v){0} + 1e-7f;
    double t0 = now();
    for (int64_t i = 0; i < iters; i++)
        for (int r = 0; r < 12; r++) acc[r] = acc[r] * a + b;
    double dt = now() - t0;
    volatile float sink = 0; for (int r = 0; r < 12; r++) for (int l = 0; l < LANES; l++) sink += acc[r][l];
    (void)sink;
    return 2.0 * 12.0 * LANES * (double)iters / dt / 1e9;
}
double lum_copy_gbs(uint8_t *dst, const uint8_t *src, int64_t n, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) { double t0 = now(); memcpy(dst, src, (size_t)n); double dt = now() - t0; if (dt < best) best = dt; }
    return 2.0 * (double)n / best / 1e9;
}
"""


def calibrate(tc: toolchain.Toolchain, flags: tuple[str, ...], cores: int) -> Machine:
    """Measure this machine's FMA peak and copy bandwidth (about half a second)."""
    import numpy as np

    # -ffp-contract=fast here: the point is to measure fused multiply-add throughput.
    library = toolchain.build_shared_library(_CALIBRATE_C, tc, (*flags, "-ffp-contract=fast"))
    lib = open_library(library, "the calibration library")
    lib.lum_fma_gflops.restype = ctypes.c_double
    lib.lum_fma_gflops.argtypes = [ctypes.c_int64]
    lib.lum_copy_gbs.restype = ctypes.c_double
    lib.lum_copy_gbs.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
    peak = max(lib.lum_fma_gflops(2_000_000) for _ in range(3))
    n = 64 << 20
    src = np.ones(n, np.uint8)
    dst = np.empty(n, np.uint8)
    bw = lib.lum_copy_gbs(dst.ctypes.data, src.ctypes.data, n, 4)
    return Machine(peak_gflops=float(peak), bandwidth_gbs=float(bw), cores=cores)
