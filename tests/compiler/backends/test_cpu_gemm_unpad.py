"""The generated GEMM building its input per band (`gemm_slab`): a convolution's padded
rows from the pad's source (`Variant.unpad`), offered where the pad may be skipped and the
bands are wide enough, equal to the reference interpreter with the pad's kernel dropped
(zero and non-zero fills, strides, a short last band, several column tiles sharing a
slab, threads on and off); a strided 1x1 convolution's positions packed
(`Variant.compact`); and the band planning."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, gemm, gemm_slab, simd, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.backends.cpu.variants import candidates
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Kernel, Schedule, schedule, unpad
from luminal.compiler.schedule.variant import Variant

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())
VECTOR = bool(simd.isa_for(FEATURES).name)


def _conv(
    cin: int,
    cout: int,
    h: int,
    w: int,
    *,
    k: int = 3,
    stride: int = 1,
    pads: tuple[tuple[int, int], tuple[int, int]] | None = None,
    batch: int = 2,
    residual: bool = False,
) -> Graph:
    rng = np.random.default_rng(cin * 100 + cout + h + k)
    b = GraphBuilder()
    img = b.input("img", (batch, cin, h, w), DType.F32)
    wt = b.const((rng.standard_normal((cout, cin, k, k)) * 0.3).astype(np.float32))
    bias = b.const((rng.standard_normal(cout) * 0.2).astype(np.float32))
    pads = pads or ((k // 2, k // 2), (k // 2, k // 2))
    y = C.conv(b, img, wt, bias, (stride, stride), pads, (1, 1), 1)
    if residual:
        y = m.add(b, y, b.input("res", y.shape, DType.F32))
    return b.build({"o": m.relu(b, y)})


def _contraction(sched: Schedule) -> Kernel:
    (kernel,) = [k for k in sched.kernels if k.kind == "contraction"]
    return kernel


def _run(
    g: Graph, sched: Schedule, kernel: Kernel, variant: Variant, isa: str | None = None
) -> None:
    settled, _ = unpad(sched, {kernel.name: variant})
    assert [x.name for x in settled.kernels] == [kernel.name]  # the pad's kernel dropped
    more = {"simd": isa} if isa else {}
    options = codegen.options_for(FEATURES, True, variants={kernel.name: variant}, **more)
    source = codegen.generate(settled, options)
    assert "float slab[" in source and "slab_at" in source
    rng = np.random.default_rng(7)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    got = NativeLibrary.build(settled, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not VECTOR, reason="the generated GEMM needs a vector ISA")
@pytest.mark.parametrize(
    "cin,cout,h,w,k,stride,pads,residual,tile,parallel",
    [
        (8, 64, 25, 40, 3, 1, None, False, None, True),  # a short last band (25 = 8 x 3 + 1)
        (8, 48, 25, 40, 3, 1, None, True, (4, 64), False),  # residual, a tile wider than N
        (6, 40, 24, 48, 3, 2, None, False, None, True),  # strided: 12 x 24 outputs
        (3, 16, 40, 40, 7, 2, None, False, (12, 32), True),  # a stem: 7x7, stride 2, pad 3
        (5, 70, 20, 36, 3, 1, ((0, 2), (1, 0)), False, None, True),  # uneven pads; N tail
    ],
    ids=str,
)
def test_unpadded_gemm_matches_reference(
    cin: int,
    cout: int,
    h: int,
    w: int,
    k: int,
    stride: int,
    pads: tuple[tuple[int, int], tuple[int, int]] | None,
    residual: bool,
    tile: tuple[int, int] | None,
    parallel: bool,
) -> None:
    g = _conv(cin, cout, h, w, k=k, stride=stride, pads=pads, residual=residual)
    sched = schedule(g)
    kernel = _contraction(sched)
    assert kernel.fold is not None and gemm.unpad_legal(sched, kernel, FEATURES)
    assert Variant(unpad=True) in candidates(sched, kernel, FEATURES)
    mr, nr = tile or (None, None)
    _run(g, sched, kernel, Variant(mr=mr, nr=nr, unpad=True, parallel=parallel))


@pytest.mark.skipif(
    "avx2" not in FEATURES or "fma" not in FEATURES, reason="no AVX2 + FMA on this machine"
)
def test_unpadded_gemm_in_avx2_vectors() -> None:
    """The 8-lane ISA (an AVX-512 machine also runs it): its own tiles, a masked last
    column vector (N = 70), a stride of 2."""
    g = _conv(5, 70, 24, 48, stride=2)
    sched = schedule(g)
    kernel = _contraction(sched)
    _run(g, sched, kernel, Variant(mr=4, nr=24, unpad=True), isa="avx2")


@pytest.mark.skipif(not VECTOR, reason="the generated GEMM needs a vector ISA")
def test_a_slab_serves_every_column_tile_of_its_band() -> None:
    """With several column tiles (N = 96 in tiles of 32) items run column tile innermost,
    so each thread builds a band's slab once for all of them: one run of items per
    thread, and the result is still exact."""
    g = _conv(16, 96, 28, 28)
    sched = schedule(g)
    kernel = _contraction(sched)
    variant = Variant(mr=8, nr=32, unpad=True)
    source = codegen.generate_kernel(sched, kernel, codegen.options_for(FEATURES, True), variant)
    assert "const int64_t nt = t % 3;" in source
    assert "lum_parallel(" in source and ", 1, " not in source.split("lum_parallel(")[1]
    _run(g, sched, kernel, variant)


@pytest.mark.skipif(not VECTOR, reason="the generated GEMM needs a vector ISA")
def test_a_non_zero_fill_reaches_the_borders() -> None:
    """A pad of ones in front of a convolution is folded like a convolution's zeros: the
    slab's borders hold the fill."""
    rng = np.random.default_rng(11)
    b = GraphBuilder()
    img = b.input("img", (2, 4, 20, 40), DType.F32)
    padded = b.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)), 1.0)
    wt = b.const((rng.standard_normal((64, 4, 3, 3)) * 0.3).astype(np.float32))
    bias = b.const(rng.standard_normal(64).astype(np.float32))
    y = C.conv(b, padded, wt, bias, (1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    g = b.build({"o": y})
    sched = schedule(g)
    kernel = _contraction(sched)
    assert kernel.fold is not None and kernel.fold.fill(g) == 1.0
    assert gemm.unpad_legal(sched, kernel, FEATURES)
    _run(g, sched, kernel, Variant(unpad=True))


def test_not_offered_without_a_pad_or_for_narrow_bands() -> None:
    """A 1x1 convolution has no pad to skip; a 7x7 map's whole image is 49 positions, a
    band under `MIN_BAND_ROWS`, where each item would copy its weight panel for a
    few rows."""
    one = schedule(_conv(8, 16, 20, 40, k=1))
    kernel = _contraction(one)
    assert kernel.fold is None and not gemm.unpad_legal(one, kernel, FEATURES)
    small = schedule(_conv(64, 64, 7, 7, batch=8))
    kernel = _contraction(small)
    assert kernel.fold is not None and gemm_slab.plan(small, kernel, 1, 1) is None
    assert not gemm.unpad_legal(small, kernel, FEATURES)
    # (Winograd's unpadding twin builds rows, not bands: `test_cpu_winograd_unpad.py`)
    assert not any(v.unpad and v.impl == "generated" for v in candidates(small, kernel, FEATURES))


def test_bands_are_whole_output_rows_within_the_slab_budget() -> None:
    """A 64-channel 56x56 map at batch 8 (ResNet's first stage): bands of 14 output rows,
    the largest divisor of 56 whose 16 padded rows of 58 fit `MAX_SLAB` (237 of 256 KB;
    15 rows fit too but leave a band of 11), and every k's offset re-based from the pad's
    58x58 planes to the slab's 16x58."""
    sched = schedule(_conv(64, 64, 56, 56, batch=8))
    kernel = _contraction(sched)
    slab = gemm_slab.plan(sched, kernel, 1, 1)
    assert slab is not None
    assert (slab.oh.size, slab.ow.size, slab.width, slab.height) == (56, 56, 58, 58)
    assert (slab.band, slab.rows, slab.bands) == (14, 16, 4)
    assert slab.floats * 4 <= gemm_slab.MAX_SLAB < 64 * 18 * 58 * 4
    # k = (cin, kh, kw): the second channel's first tap is one slab plane on
    assert slab.table[:4] == (0, 1, 2, 58) and slab.table[9] == slab.rows * 58
    assert slab.planes == 64 and slab.row_step == 58 and slab.col_step == 1


@pytest.mark.skipif(not VECTOR, reason="the generated GEMM needs a vector ISA")
@pytest.mark.parametrize(
    "cin,cout,h,w,stride,residual,isa",
    [
        (16, 64, 40, 48, 2, True, None),  # ResNet's downsampling: 1x1, stride 2, + residual
        (8, 70, 30, 44, 2, False, None),  # a masked last column vector, a short last band
        (8, 48, 36, 72, 3, False, "avx2"),
    ],
    ids=str,
)
def test_compacted_strided_1x1_matches_reference(
    cin: int, cout: int, h: int, w: int, stride: int, residual: bool, isa: str | None
) -> None:
    """`Variant(compact=True)`: a strided 1x1 convolution's sampled positions packed per
    band, read densely; equal to the reference."""
    if isa == "avx2" and ("avx2" not in FEATURES or "fma" not in FEATURES):
        pytest.skip("no AVX2 + FMA on this machine")
    g = _conv(cin, cout, h, w, k=1, stride=stride, residual=residual)
    sched = schedule(g)
    kernel = _contraction(sched)
    assert kernel.fold is None and gemm.compact_legal(sched, kernel, FEATURES)
    assert Variant(compact=True) in candidates(sched, kernel, FEATURES)
    variant = Variant(compact=True, parallel=True)
    more = {"simd": isa} if isa else {}
    options = codegen.options_for(FEATURES, True, variants={kernel.name: variant}, **more)
    source = codegen.generate(sched, options)
    assert "float slab[" in source
    rng = np.random.default_rng(5)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-4)


def test_compaction_only_for_a_strided_single_position_window() -> None:
    """Nothing to pack in a 1x1 convolution without a stride; a 3x3 window's rows
    overlap (its padded rows are `unpad`'s)."""
    plain = schedule(_conv(16, 64, 40, 48, k=1))
    assert not gemm.compact_legal(plain, _contraction(plain), FEATURES)
    window = schedule(_conv(16, 64, 40, 48, stride=2))
    kernel = _contraction(window)
    assert not gemm.compact_legal(window, kernel, FEATURES)
    assert gemm.unpad_legal(window, kernel, FEATURES)
    strided = schedule(_conv(16, 64, 40, 48, k=1, stride=2))
    slab = gemm_slab.plan(strided, _contraction(strided), 1, 1, compact=True)
    assert slab is not None and slab.compact and slab.row_width == 24
    assert slab.rows == slab.band and slab.table[:2] == (0, slab.band * 24)
