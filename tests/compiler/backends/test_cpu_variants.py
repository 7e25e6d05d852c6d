"""Every kind of CPU kernel variant, compiled and run natively, against the reference
interpreter: each register tile, K blocking, OpenBLAS, parallel on and off, the portable
loop nest and the AVX2 micro-kernel; and `candidates` only offers variants that work."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.backends.cpu import blas, codegen, gemm, simd, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.backends.cpu.variants import candidates, describe
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import norm
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder, Op
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Schedule, schedule, work
from luminal.compiler.schedule.variant import Variant

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())
ISA = simd.isa_for(FEATURES)


def _suite() -> Graph:
    """One graph holding a kernel of each shape of interest, sizes not multiples of any
    tile: a ragged matmul, attention (q @ k^T and probs @ v through permutes), a strided
    3x3 convolution, a convolution with a residual, SiLU and clip epilogue, matmul + bias +
    erf-GELU and + tanh-GELU epilogues, a contraction
    whose reduction is split by a permute (K read through an offset table), softmax."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()

    def w(*shape: int) -> object:
        return b.const((rng.standard_normal(shape) * 0.2).astype(np.float32))

    x = b.input("x", (37, 70), DType.F32)
    outs = {"mm": C.matmul(b, x, w(70, 45))}
    q = b.input("q", (3, 19, 24), DType.F32)  # heads, sequence, head dim
    k = b.input("k", (3, 19, 24), DType.F32)
    v = b.input("v", (3, 19, 24), DType.F32)
    scores = C.matmul(b, q, b.permute(k, (0, 2, 1)))
    probs = norm.softmax(b, scores, 2)
    ctx = C.matmul(b, probs, v)  # [3, 19, 24]
    outs["ctx"] = ctx
    merged = b.reshape(b.permute(ctx, (1, 0, 2)), (19, 72))  # K = (head, d): not one stride
    outs["proj"] = C.matmul(b, merged, w(72, 33))
    img = b.input("img", (1, 5, 11, 11), DType.F32)
    outs["conv"] = m.relu(
        b, C.conv(b, img, w(13, 5, 3, 3), w(13), (2, 2), ((1, 1), (1, 1)), (1, 1))
    )
    outs["conv1"] = C.conv(b, img, w(20, 5, 1, 1), None, (1, 1), ((0, 0), (0, 0)), (1, 1))
    # an NCHW epilogue reading another tensor and calling exp2 (residual + SiLU), with a
    # clip after it: computed along the tile's rows, stored by channel afterwards
    skip = b.input("skip", (1, 17, 11, 11), DType.F32)
    res = m.add(b, C.conv(b, img, w(17, 5, 3, 3), w(17), (1, 1), ((1, 1), (1, 1)), (1, 1)), skip)
    act = m.mul(b, res, m.sigmoid(b, res))
    outs["conv_silu"] = m.clip(b, act, m.like(b, -0.25, act), m.like(b, 2.0, act))
    h = C.gemm(b, x, w(70, 50), w(50))
    outs["gelu"] = m.gelu(b, h)
    outs["gelu_tanh"] = m.gelu(b, C.matmul(b, x, w(70, 21)), "tanh")
    outs["log"] = m.log(b, b.binary(Op.ADD, b.unary(Op.EXP2, x), m.like(b, 1.0, x)))
    tiny = b.input("tiny", (5, 7), DType.F32)  # narrower than a vector, shorter than a tile
    outs["tiny"] = C.matmul(b, tiny, w(7, 3))
    outs["pool"] = b.reduce(Op.RMAX, b.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)), -np.inf), [3])
    return b.build(outs)


def _feeds(g: Graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}


@pytest.fixture(scope="module")
def suite() -> tuple[Graph, Schedule, dict[str, np.ndarray], dict[str, np.ndarray]]:
    g = _suite()
    feeds = _feeds(g)
    return g, schedule(g), feeds, reference.run(g, feeds)


def _check(sched: Schedule, feeds, want, options: codegen.CodegenOptions) -> str:  # type: ignore[no-untyped-def]
    """Compare every output; the library's source, for what it was built from."""
    lib = NativeLibrary.build(sched, options, FLAGS)
    got = lib.run(feeds)
    for name, expect in want.items():
        np.testing.assert_allclose(got[name], expect, rtol=1e-4, atol=1e-5, err_msg=name)
    return lib.source


def _contractions(sched: Schedule) -> list[str]:
    return [k.name for k in sched.kernels if k.kind == "contraction"]


def _all(sched: Schedule, variant: Variant) -> dict[str, Variant]:
    return {name: variant for name in _contractions(sched)}


def test_default_variant(suite) -> None:  # type: ignore[no-untyped-def]
    _, sched, feeds, want = suite
    source = _check(sched, feeds, want, codegen.options_for(FEATURES, True))
    assert "etile[" in source and "lum_clampf(" in source  # NCHW epilogues, by rows
    if simd.isa_for(FEATURES).transpose:  # a channel-major tile: transposed, stored by column
        assert "LUM_VTRANSPOSE(r);" in source and "LUM_VSTOREN(&out[" in source


@pytest.mark.parametrize("tile", gemm.tiles(FEATURES), ids=lambda t: f"{t[0]}x{t[1]}")
def test_every_register_tile(suite, tile) -> None:  # type: ignore[no-untyped-def]
    _, sched, feeds, want = suite
    variants = _all(sched, Variant(mr=tile[0], nr=tile[1]))
    _check(sched, feeds, want, codegen.options_for(FEATURES, True, variants=variants))


def test_k_blocking_keeps_partial_sums(suite) -> None:  # type: ignore[no-untyped-def]
    _, sched, feeds, want = suite
    variants = _all(sched, Variant(kc=16))  # K = 70, 24, 19, 45: several blocks, a short last
    _check(sched, feeds, want, codegen.options_for(FEATURES, True, variants=variants))


@pytest.mark.parametrize("parallel", [True, False], ids=["par", "seq"])
def test_parallel_on_and_off(suite, parallel: bool) -> None:  # type: ignore[no-untyped-def]
    _, sched, feeds, want = suite
    variants = {k.name: Variant(parallel=parallel) for k in sched.kernels}
    _check(sched, feeds, want, codegen.options_for(FEATURES, True, variants=variants))


@pytest.mark.skipif(not blas.available(), reason="scipy-openblas32 is not installed")
@pytest.mark.parametrize("parallel", [True, False], ids=["par", "seq"])
def test_blas_where_legal(suite, parallel: bool) -> None:  # type: ignore[no-untyped-def]
    _, sched, feeds, want = suite
    legal = [k.name for k in sched.kernels if blas.legal(sched, k)]
    assert len(legal) >= 5  # matmuls, attention both ways, epilogues, the 1x1 convolution
    variants = {name: Variant(impl="blas", parallel=parallel) for name in legal}
    options = codegen.options_for(FEATURES, True, variants=variants)
    assert blas.MARKER in codegen.generate(sched, options)
    _check(sched, feeds, want, options)


def test_portable_loop_nest(suite) -> None:  # type: ignore[no-untyped-def]
    _, sched, feeds, want = suite
    _check(sched, feeds, want, codegen.options_for(FEATURES, True, simd="", mr=4, nr=16))


@pytest.mark.slow  # heavy (10-25 s): make slow
@pytest.mark.skipif("avx2" not in FEATURES or "fma" not in FEATURES, reason="no AVX2 + FMA")
def test_avx2_micro_kernel(suite) -> None:  # type: ignore[no-untyped-def]
    _, sched, feeds, want = suite
    for mr, nr in gemm.tiles(("avx2", "fma")):
        variants = _all(sched, Variant(mr=mr, nr=nr))
        options = codegen.options_for(FEATURES, True, simd="avx2", variants=variants)
        _check(sched, feeds, want, options)


def test_candidates_are_legal_and_short(suite) -> None:  # type: ignore[no-untyped-def]
    _, sched, feeds, want = suite
    offered: dict[str, tuple[Variant, ...]] = {}
    for k in sched.kernels:
        cands = candidates(sched, k, FEATURES)
        assert cands[0] == Variant() and 1 <= len(cands) <= 8 and len(set(cands)) == len(cands)
        offered[k.name] = cands
        cost = work.cost(sched, k)
        assert cost.flops >= 0 and cost.bytes > 0 and describe(sched, k)
    # every kernel in its n-th candidate (or its last), compiled together and checked
    for n in range(1, max(len(c) for c in offered.values())):
        variants = {name: c[min(n, len(c) - 1)] for name, c in offered.items()}
        _check(sched, feeds, want, codegen.options_for(FEATURES, True, variants=variants))


def test_contraction_estimate_counts_multiply_adds(suite) -> None:  # type: ignore[no-untyped-def]
    g, sched, _, _ = suite
    mm = next(k for k in sched.kernels if k.node == dict(g.outputs)["mm"])
    assert work.cost(sched, mm).flops == 2 * 37 * 70 * 45
    assert describe(sched, mm) == "[37x70]@[70x45]"


def test_exp2_and_log2_special_values(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The vectorized polynomials against numpy over the whole float range."""
    rng = np.random.default_rng(2)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45, 1.1754942e-38, 3.4e38]
    special += [-149.5, -126.0, 127.99, 128.0, 200.0, -200.0, 0.5, 2.0]
    bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    wide = rng.uniform(-160, 140, 20000).astype(np.float32)
    data = np.concatenate([np.array(special, np.float32), bits, wide])
    b = GraphBuilder()
    x = b.input("x", data.shape, DType.F32)
    g = b.build({"e": b.unary(Op.EXP2, x), "l": b.unary(Op.LOG2, x)})
    got = NativeLibrary.build(schedule(g), codegen.options_for(FEATURES, True), FLAGS).run(
        {"x": data}
    )
    with np.errstate(all="ignore"):
        for name, fn in (("e", np.exp2), ("l", np.log2)):
            want = fn(data.astype(np.float64))
            want32 = want.astype(np.float32)
            same = (got[name] == want32) | (np.isnan(got[name]) & np.isnan(want32))
            ulps = np.abs(got[name] - want) / np.spacing(np.abs(want32)).astype(np.float64)
            assert np.all(same | (ulps <= 2)), data[~(same | (ulps <= 2))][:5]


@pytest.mark.skipif(not blas.available(), reason="scipy-openblas32 is not installed")
def test_blas_artifact_records_the_library_and_runs(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Through the pipeline: the manifest names the OpenBLAS linked, the artifact loads
    and matches the interpreter; without the library the load is a clear refusal."""
    import luminal
    from luminal.compiler.frontend.model import LoadedModel
    from luminal.compiler.pipeline import compile_model
    from luminal.errors import ArtifactIncompatible

    rng = np.random.default_rng(3)
    b = GraphBuilder()
    x = b.input("x", (9, 40), DType.F32)
    y = m.relu(b, C.gemm(b, x, b.const(rng.standard_normal((40, 24)).astype(np.float32)), None))
    g = b.build({"y": y})
    from dataclasses import replace

    from luminal.compiler.backends.cpu.backend import Context

    sched = schedule(g)
    legal = {k.name: Variant(impl="blas") for k in sched.kernels if blas.legal(sched, k)}
    assert legal
    plain = Context.of  # as if the search had chosen the library GEMM for every kernel
    monkeypatch.setattr(Context, "of", staticmethod(lambda r: plain(replace(r, variants=legal))))
    path = tmp_path / "m.lmnl"
    compile_model(LoadedModel(g, "test", "test"), path)
    monkeypatch.setattr(Context, "of", plain)
    feeds = _feeds(g)
    session = luminal.load(path)
    assert session.manifest.target["blas"]["package"] == blas.PACKAGE
    np.testing.assert_allclose(
        session.run(feeds)["y"], reference.run(g, feeds)["y"], rtol=1e-4, atol=1e-5
    )
    monkeypatch.setattr(blas, "find", lambda: None)
    with pytest.raises(ArtifactIncompatible, match="OpenBLAS"):
        luminal.load(path)


@pytest.mark.parametrize("impl", ["generated", "blas"])
def test_f64_contraction(impl: str) -> None:
    """f64 takes the portable loop nest (or dgemm), on the thread pool."""
    if impl == "blas" and not blas.available():
        pytest.skip("scipy-openblas32 is not installed")
    rng = np.random.default_rng(4)
    b = GraphBuilder()
    x = b.input("x", (33, 70), DType.F64)
    g = b.build({"y": C.matmul(b, x, b.const(rng.standard_normal((70, 41))))})
    sched = schedule(g)
    variants = {k.name: Variant(impl=impl, parallel=True) for k in sched.kernels}
    feeds = {"x": rng.standard_normal((33, 70))}
    options = codegen.options_for(FEATURES, True, variants=variants)
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)["y"]
    np.testing.assert_allclose(got, reference.run(g, feeds)["y"], rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(not ISA.loadn, reason="no masked vector loads here")
@pytest.mark.parametrize("tile", gemm.tiles(FEATURES), ids=lambda t: f"{t[0]}x{t[1]}")
def test_matrix_vector_tail_tile_reads_the_weights_in_place(tile) -> None:  # type: ignore[no-untyped-def]
    """One row against a weight whose columns are not a multiple of the tile (an ImageNet
    head's 1000 classes, here 200 in 40-wide panels, and a ragged 37): the narrower last
    column tile reads its panel in place through a masked last vector, never past a row,
    instead of a zero-padded copy; its values are the reference interpreter's."""
    rng = np.random.default_rng(7)
    b = GraphBuilder()
    x = b.input("x", (1, 96), DType.F32)
    outs = {"head": C.gemm(b, x, b.const(rng.standard_normal((96, 200)).astype(np.float32)),
                           b.const(rng.standard_normal(200).astype(np.float32)))}  # fmt: skip
    outs["ragged"] = C.matmul(b, x, b.const(rng.standard_normal((96, 37)).astype(np.float32)))
    g = b.build(outs)
    sched = schedule(g)
    feeds = {"x": rng.standard_normal((1, 96)).astype(np.float32)}
    variants = _all(sched, Variant(mr=tile[0], nr=tile[1]))
    source = _check(
        sched,
        feeds,
        reference.run(g, feeds),
        codegen.options_for(FEATURES, True, variants=variants),
    )
    assert "LUM_VLOADN(yk" in source
