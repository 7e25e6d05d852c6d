"""The stencil contraction (a depthwise convolution's product, `stencil.py`), compiled and
run natively, against the reference interpreter: stride 1 and 2, 3x3 to 7x7 windows,
rows shorter than a vector, rows that leave a masked tail, full strided blocks, bias and ReLU epilogues, SiLU with a
residual read along the row,
threads on and off, on every vector ISA this machine has; grouped convolutions whose
channels per group share each load; `legal` only for the stencil shape (not a
convolution with many channels per group, or a matmul, batched with few rows too); and the variant that reads the pad's
source instead of the pad (`Variant.unpad`), the pad's kernel then dropped."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, simd, stencil, toolchain
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
_BEST = simd.isa_for(FEATURES)
#: Every ISA with masked loads this machine runs (AVX-512 machines also run AVX2 code).
ISAS = [isa.name for isa in (simd.AVX2, simd.AVX512) if _BEST.loadn and isa.width <= _BEST.width]


def _conv_graph(
    c: int,
    h: int,
    w: int,
    *,
    k: int = 3,
    stride: int = 1,
    groups: int | None = None,
    residual: bool = False,
) -> Graph:
    rng = np.random.default_rng(c * 100 + h * 10 + k)
    groups = c if groups is None else groups
    b = GraphBuilder()
    img = b.input("img", (2, c, h, w), DType.F32)
    wt = b.const((rng.standard_normal((c, c // groups, k, k)) * 0.3).astype(np.float32))
    bias = b.const((rng.standard_normal(c) * 0.2).astype(np.float32))
    pad = k // 2
    y = C.conv(b, img, wt, bias, (stride, stride), ((pad, pad), (pad, pad)), (1, 1), groups)
    if not residual:
        return b.build({"o": m.relu(b, y)})
    # SiLU, then a residual read at the output's own element: an epilogue that reads
    # another tensor (along the row, where a tail block's dropped lanes must not read
    # past it) and calls exp2
    res = b.input("res", y.shape, DType.F32)
    return b.build({"o": m.add(b, m.mul(b, y, m.sigmoid(b, y)), res)})


def _contractions(sched: Schedule) -> list[Kernel]:
    return [k for k in sched.kernels if k.kind == "contraction"]


@pytest.mark.skipif(not ISAS, reason="no AVX2 or AVX-512")
@pytest.mark.parametrize(
    "c,h,w,k,stride",
    [
        (3, 7, 7, 3, 1),  # a row shorter than a vector: masked loads only
        (5, 14, 14, 3, 1),
        (4, 9, 37, 3, 1),  # full blocks and a masked tail
        (6, 12, 56, 3, 2),  # strided: gathers
        (4, 6, 130, 3, 2),  # strided full blocks (even lanes of two loads), a gathered tail
        (3, 11, 13, 5, 2),
        (2, 8, 21, 7, 1),
    ],
    ids=str,
)
@pytest.mark.parametrize(
    "parallel,residual",
    [(True, False), (False, False), (False, True)],
    ids=["par-relu", "seq-relu", "seq-silu-residual"],
)
@pytest.mark.parametrize("isa", ISAS)
def test_stencil_matches_reference(
    c: int, h: int, w: int, k: int, stride: int, parallel: bool, isa: str, residual: bool
) -> None:
    g = _conv_graph(c, h, w, k=k, stride=stride, residual=residual)
    sched = schedule(g)
    (kernel,) = _contractions(sched)
    assert stencil.legal(sched, kernel, simd.ISAS[isa])
    assert Variant(impl="stencil") in candidates(sched, kernel, FEATURES)
    variants = {kernel.name: Variant(impl="stencil", parallel=parallel)}
    options = codegen.options_for(FEATURES, True, simd=isa, variants=variants)
    source = codegen.generate(sched, options)
    assert "LUM_VLOADN" in source
    assert ("LUM_VLOADEVEN(ar" in source) == (stride == 2)
    # the epilogue's loops along the row are vectorized (`omp simd`); a row shorter than
    # a block runs it over the whole block into a second tile, then copies the valid part
    row, lanes = g.nodes[g.outputs[0][1]].shape[-1], simd.ISAS[isa].width
    block = min(stencil.BLOCK // lanes, -(-row // lanes)) * lanes
    assert ("float etile[" in source) == (row < block)
    assert "#pragma omp simd\n" in source
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "c,groups", [(4, 1), (4 * stencil.MAX_CHANNELS, 2)], ids=["dense", "grouped"]
)
def test_not_legal_when_the_weights_have_rows(c: int, groups: int) -> None:
    """A dense convolution, even of few channels, or a grouped one with more output
    channels per group than `MAX_CHANNELS` (only the weights move along them) is a
    matrix product, not a stencil."""
    sched = schedule(_conv_graph(c, 10, 10, groups=groups))
    (kernel,) = _contractions(sched)
    assert not stencil.legal(sched, kernel, simd.AVX2)
    assert Variant(impl="stencil") not in candidates(sched, kernel, FEATURES)


@pytest.mark.parametrize("transposed", [False, True], ids=["pv", "qk"])
def test_not_legal_for_a_batched_matmul_with_few_rows(transposed: bool) -> None:
    """Attention's per-head products with 8 query rows: the weights-like operand owns
    the rows (8, within `MAX_CHANNELS`) and shares the batch and head loops, like a
    grouped convolution's weights, but the other operand has no rows of its own (no
    window): a matrix product, the GEMM's."""
    b = GraphBuilder()
    q = b.input("q", (2, 2, 8, 16), DType.F32)
    kv = b.input("kv", (2, 2, 32, 16) if transposed else (2, 2, 16, 32), DType.F32)
    rhs = b.permute(kv, (0, 1, 3, 2)) if transposed else kv
    sched = schedule(b.build({"o": C.matmul(b, q, rhs)}))
    (kernel,) = _contractions(sched)
    assert kernel.contraction is not None
    assert stencil.StencilLayout.of(kernel.contraction) is None
    assert not any(v.impl in stencil.IMPLS for v in candidates(sched, kernel, FEATURES))


@pytest.mark.skipif(not ISAS, reason="no AVX2 or AVX-512")
@pytest.mark.parametrize(
    "c,groups,h,w,stride",
    [
        (16, 2, 14, 14, 1),  # regnet's 8 channels per group: one block of 8
        (24, 2, 9, 37, 1),  # 12 per group: blocks of a divisor (6 or 2), a masked tail
        (12, 4, 12, 56, 2),  # 3 per group, strided
        (10, 2, 7, 7, 1),  # 5 per group, a row shorter than a vector
    ],
    ids=str,
)
@pytest.mark.parametrize(
    "parallel,unpadded", [(True, False), (False, False), (True, True)], ids=["par", "seq", "unpad"]
)
@pytest.mark.parametrize("isa", ISAS)
def test_grouped_channels_share_each_load(
    c: int, groups: int, h: int, w: int, stride: int, parallel: bool, unpadded: bool, isa: str
) -> None:
    """A grouped convolution's channels within a group (`StencilLayout.chan`): the
    weights move along them and the activations do not, so a block of them shares each
    vector load of the activations, one broadcast weight per channel.  Unpadded, each
    item builds the rows it reads of each of its group's planes (`PlaneRows`)."""
    g = _conv_graph(c, h, w, stride=stride, groups=groups)
    sched = schedule(g)
    (kernel,) = _contractions(sched)
    assert kernel.contraction is not None
    lay = stencil.StencilLayout.of(kernel.contraction)
    assert lay is not None and lay.chan is not None and lay.chan.size == c // groups
    assert Variant(impl="stencil") in candidates(sched, kernel, FEATURES)
    assert stencil.unpad_legal(sched, kernel, simd.ISAS[isa])
    variant = Variant(impl="stencil", parallel=parallel, unpad=unpadded)
    if unpadded:
        sched, _ = unpad(sched, {kernel.name: variant})
        assert [x.name for x in sched.kernels] == [kernel.name]  # the pad's kernel dropped
    options = codegen.options_for(FEATURES, True, simd=isa, variants={kernel.name: variant})
    source = codegen.generate(sched, options)
    assert "const float *br = bb + " in source
    assert ("float tile[" in source) == unpadded
    rng = np.random.default_rng(2)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-4)


def test_not_legal_without_masked_loads() -> None:
    sched = schedule(_conv_graph(4, 10, 10))
    (kernel,) = _contractions(sched)
    assert stencil.legal(sched, kernel, simd.AVX2)
    assert not stencil.legal(sched, kernel, simd.AVX)
    assert not stencil.legal(sched, kernel, simd.NONE)


@pytest.mark.skipif("avx512" not in ISAS, reason="no AVX-512: no half-width variant")
@pytest.mark.parametrize(
    "c,h,w,k,stride,residual",
    [
        (3, 7, 7, 5, 1, True),  # a 7x7 map: 7 of 8 AVX2 lanes, against 7 of 16
        (4, 7, 7, 3, 1, False),
        (5, 11, 11, 3, 2, True),  # strided to 6 columns: the even lanes of two loads
        (2, 9, 12, 3, 1, False),  # 12 columns: a full half vector and a masked tail
    ],
    ids=str,
)
def test_half_width_stencil_matches_reference(
    c: int, h: int, w: int, k: int, stride: int, residual: bool
) -> None:
    """Rows shorter than an AVX-512 vector may run in AVX2 vectors (`stencil-half`,
    `simd.HALF`): offered for those rows only, and equal to the reference."""
    g = _conv_graph(c, h, w, k=k, stride=stride, residual=residual)
    sched = schedule(g)
    (kernel,) = _contractions(sched)
    assert stencil.half_legal(sched, kernel, simd.AVX512)
    assert not stencil.half_legal(sched, kernel, simd.AVX2)  # nothing narrower to carry
    assert Variant(impl=stencil.HALF_IMPL) in candidates(sched, kernel, FEATURES)
    variants = {kernel.name: Variant(impl=stencil.HALF_IMPL)}
    options = codegen.options_for(FEATURES, True, simd="avx512", variants=variants)
    source = codegen.generate(sched, options)
    assert "lum_hf c0_0" in source and "LUM_HFMA(" in source and "LUM_VFMA(s" not in source
    rng = np.random.default_rng(2)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-5)


def test_half_width_is_offered_only_for_rows_shorter_than_a_vector() -> None:
    sched = schedule(_conv_graph(4, 20, 20))  # 20 columns: more than 16 lanes
    (kernel,) = _contractions(sched)
    assert stencil.legal(sched, kernel, simd.AVX512)
    assert not stencil.half_legal(sched, kernel, simd.AVX512)


@pytest.mark.skipif(not ISAS, reason="no AVX2 or AVX-512")
@pytest.mark.parametrize(
    "c,h,w,k,stride,residual",
    [
        (3, 7, 7, 3, 1, False),  # the whole map in one item's rows
        (4, 9, 37, 3, 1, True),  # full blocks and a masked tail, SiLU + residual
        (4, 10, 12, 3, 2, False),  # strided: even lanes of two loads
        (4, 6, 130, 3, 2, False),
        (3, 11, 13, 5, 2, True),
        (2, 8, 21, 7, 1, False),
        (16, 28, 28, 3, 1, False),  # items of several row blocks, their rows built once
        (12, 20, 40, 3, 2, True),
    ],
    ids=str,
)
@pytest.mark.parametrize("impl", [stencil.IMPL, stencil.HALF_IMPL])
@pytest.mark.parametrize("compact", [False, True], ids=["", "split"])
def test_unpadding_stencil_reads_the_source_and_matches_reference(
    c: int, h: int, w: int, k: int, stride: int, residual: bool, impl: str, compact: bool
) -> None:
    """`Variant(unpad=True)`: the stencil builds the padded rows each item reads from the
    pad's source (`Kernel.fold`); settled (`schedule.unpad`), the pad's kernel is gone and
    the model still equals the reference, zeros at every border included.  With
    `compact` (stride 2 only, `stencil.compact_legal`), the tile is split into its even
    and odd elements and every tap is a unit-stride load from one half."""
    g = _conv_graph(c, h, w, k=k, stride=stride, residual=residual)
    sched = schedule(g)
    (kernel,) = _contractions(sched)
    assert kernel.fold is not None
    isa = simd.ISAS[ISAS[-1]]
    if impl == stencil.HALF_IMPL and not stencil.half_legal(sched, kernel, isa):
        pytest.skip("no half-width variant for this row")
    assert stencil.compact_legal(sched, kernel, isa) == (stride == 2)
    if compact and stride != 2:
        pytest.skip("compact: stride 2 only")
    variant = Variant(impl=impl, unpad=True, parallel=c >= 12, compact=compact)
    assert stencil.unpad_legal(sched, kernel, isa)
    assert Variant(impl=impl, unpad=True, compact=compact) in candidates(sched, kernel, FEATURES)
    settled, _ = unpad(sched, {kernel.name: variant})
    assert [x.name for x in settled.kernels] == [kernel.name]  # the pad's kernel dropped
    (folded,) = settled.kernels
    assert kernel.fold.source in folded.reads and kernel.fold.pad not in folded.reads
    options = codegen.options_for(FEATURES, True, simd=isa.name, variants={kernel.name: variant})
    source = codegen.generate(settled, options)
    assert "float tile[" in source
    assert ("float dt[" in source) == compact and ("LOADEVEN(ar" in source) == (
        stride == 2 and not compact
    )
    assert ("for (int64_t gi = 0;" in source) == (c >= 12)  # several row blocks an item
    rng = np.random.default_rng(3)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    got = NativeLibrary.build(settled, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-5)


def test_unpadding_is_offered_only_where_the_stencil_reads_a_pad_alone() -> None:
    """A dense convolution may read its pad's source too (the schedule is backend-neutral)
    but is no stencil (its GEMM's own unpadding: test_cpu_gemm_unpad.py); a convolution
    without a pad has nothing to fold."""
    dense = schedule(_conv_graph(4, 10, 10, groups=1))
    (kernel,) = _contractions(dense)
    assert kernel.fold is not None and not stencil.unpad_legal(dense, kernel, simd.AVX2)
    assert not any(v.unpad and v.impl in stencil.IMPLS for v in candidates(dense, kernel, FEATURES))
    one = schedule(_conv_graph(4, 10, 10, k=1))  # a 1x1 window: no pad
    (kernel,) = _contractions(one)
    assert kernel.fold is None and not stencil.unpad_legal(one, kernel, simd.AVX2)
