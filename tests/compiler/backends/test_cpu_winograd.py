"""The Winograd F(2x2, 3x3) and F(4x4, 3x3) convolution variants, compiled and run natively, against the
reference interpreter: odd and even outputs, channels not multiples of a vector, bias,
residual add and ReLU epilogues, threads on and off; and `legal` only for 3x3 stride-1
convolutions."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, simd, toolchain, winograd
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.backends.cpu.variants import candidates
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder, Op
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Schedule, schedule
from luminal.compiler.schedule.variant import Variant

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())
ISA = simd.isa_for(FEATURES)


def _conv_graph(
    cin: int,
    cout: int,
    h: int,
    w: int,
    *,
    k: int = 3,
    stride: int = 1,
    dilation: int = 1,
    residual: bool = True,
    batch: int = 1,
) -> Graph:
    rng = np.random.default_rng(cin * 1000 + h)
    b = GraphBuilder()
    img = b.input("img", (batch, cin, h, w), DType.F32)
    wt = b.const((rng.standard_normal((cout, cin, k, k)) * 0.2).astype(np.float32))
    bias = b.const((rng.standard_normal(cout) * 0.2).astype(np.float32))
    pad = dilation * (k // 2)
    y = C.conv(b, img, wt, bias, (stride, stride), ((pad, pad), (pad, pad)), (dilation, dilation))
    if residual:
        oh, ow = (
            (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1,
            (w + 2 * pad - dilation * (k - 1) - 1) // stride + 1,
        )
        res = b.input("res", (batch, cout, oh, ow), DType.F32)
        y = b.binary(Op.ADD, y, res)
    return b.build({"o": m.relu(b, y)})


def _feeds(g: Graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}


def _convs(sched: Schedule) -> list[str]:
    return [k.name for k in sched.kernels if k.kind == "contraction"]


@pytest.mark.skipif(not ISA.name, reason="no vector ISA")
@pytest.mark.parametrize(
    "cin,cout,h,w",
    [
        (5, 13, 7, 7),
        (3, 20, 8, 8),
        (17, 33, 9, 6),
        (2, 19, 5, 11),
        (24, 40, 14, 14),
        (96, 70, 13, 10),
    ],
    ids=lambda v: str(v),
)
@pytest.mark.parametrize("parallel", [True, False], ids=["par", "seq"])
@pytest.mark.parametrize("impl", list(winograd.TILE))
def test_winograd_matches_reference(
    cin: int, cout: int, h: int, w: int, parallel: bool, impl: str
) -> None:
    g = _conv_graph(cin, cout, h, w)
    sched = schedule(g)
    names = _convs(sched)
    assert len(names) == 1 and winograd.legal(
        sched, sched.kernels[[k.name for k in sched.kernels].index(names[0])], impl
    )
    variants = {names[0]: Variant(impl=impl, parallel=parallel)}
    options = codegen.options_for(FEATURES, True, variants=variants)
    assert "_wmk" in codegen.generate(sched, options)
    feeds = _feeds(g)
    want = reference.run(g, feeds)
    lib = NativeLibrary.build(sched, options, FLAGS)
    for _ in range(2):  # the second call reuses the transformed weights
        got = lib.run(feeds)
        np.testing.assert_allclose(got["o"], want["o"], rtol=1e-3, atol=1e-4)


@pytest.mark.skipif(not ISA.name, reason="no vector ISA")
@pytest.mark.parametrize("parallel", [True, False], ids=["par", "seq"])
@pytest.mark.parametrize("impl", list(winograd.TILE))
def test_winograd_over_a_batch(parallel: bool, impl: str) -> None:
    """A batch is a third output loop X moves along with no window loop: each image's
    tiles are their own work items, and the residual is read at the same image."""
    g = _conv_graph(9, 21, 10, 7, batch=3)
    sched = schedule(g)
    (name,) = _convs(sched)
    kernel = sched.kernels[[k.name for k in sched.kernels].index(name)]
    conv = winograd.match(sched, kernel, winograd.TILE[impl])
    assert conv is not None and conv.batch is not None and conv.batch.size == 3
    options = codegen.options_for(
        FEATURES, True, variants={name: Variant(impl=impl, parallel=parallel)}
    )
    feeds = _feeds(g)
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("impl", list(winograd.TILE))
def test_portable_winograd(impl: str) -> None:
    g = _conv_graph(6, 10, 9, 9, residual=False)
    sched = schedule(g)
    variants = {n: Variant(impl=impl) for n in _convs(sched)}
    options = codegen.options_for(FEATURES, True, simd="", mr=4, nr=16, variants=variants)
    feeds = _feeds(g)
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize(
    "kw",
    [{"stride": 2}, {"k": 1}, {"k": 7}, {"dilation": 2}],
    ids=["stride2", "1x1", "7x7", "dilated"],
)
def test_not_legal_for_other_convolutions(kw: dict[str, int]) -> None:
    sched = schedule(_conv_graph(8, 16, 14, 14, residual=False, **kw))
    kernels = [k for k in sched.kernels if k.kind == "contraction"]
    for impl in winograd.TILE:
        assert kernels and not any(winograd.legal(sched, k, impl) for k in kernels)
        assert all(Variant(impl=impl) not in candidates(sched, k, FEATURES) for k in kernels)


@pytest.mark.parametrize("m", sorted(winograd._MATRICES))
def test_transform_matrices(m: int) -> None:
    """A^T [(G g G^T) * (B^T d B)] A is the 3x3 correlation of d with g, m x m outputs."""
    at, gm, bt = (np.array(x, dtype=np.float64) for x in winograd._MATRICES[m])
    rng = np.random.default_rng(m)
    g, d = rng.standard_normal((3, 3)), rng.standard_normal((m + 2, m + 2))
    got = at @ ((gm @ g @ gm.T) * (bt @ d @ bt.T)) @ at.T
    want = [[np.sum(d[i : i + 3, j : j + 3] * g) for j in range(m)] for i in range(m)]
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_not_legal_for_matmul() -> None:
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (9, 3, 3), DType.F32)
    y = C.matmul(b, b.reshape(x, (27, 3)), b.const(rng.standard_normal((3, 3)).astype(np.float32)))
    sched = schedule(b.build({"o": y}))
    kernels = [k for k in sched.kernels if k.kind == "contraction"]
    assert kernels and not any(winograd.legal(sched, k) for k in kernels)


@pytest.mark.skipif(not ISA.name, reason="no vector ISA")
def test_offered_for_3x3() -> None:
    sched = schedule(_conv_graph(8, 16, 14, 14))
    (k,) = [k for k in sched.kernels if k.kind == "contraction"]
    cands = candidates(sched, k, FEATURES)
    # at most 8 beside the unpadding twins, which the search times only beside their twin
    assert Variant(impl="winograd") in cands and len([v for v in cands if not v.unpad]) <= 8
    assert Variant(impl="winograd4") in cands


@pytest.mark.skipif("avx2" not in FEATURES or "fma" not in FEATURES, reason="no AVX2 + FMA")
@pytest.mark.parametrize("impl", list(winograd.TILE))
def test_avx2_winograd(impl: str) -> None:
    g = _conv_graph(17, 33, 9, 6)
    sched = schedule(g)
    variants = {n: Variant(impl=impl) for n in _convs(sched)}
    options = codegen.options_for(FEATURES, True, simd="avx2", variants=variants)
    feeds = _feeds(g)
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-3, atol=1e-4)


def test_not_legal_when_buffers_would_be_too_large() -> None:
    sched = schedule(_conv_graph(800, 200, 2, 180, residual=False))
    kernels = [k for k in sched.kernels if k.kind == "contraction"]
    for impl in winograd.TILE:
        assert kernels and not any(winograd.legal(sched, k, impl) for k in kernels)


@pytest.mark.skipif(not ISA.name, reason="no vector ISA")
def test_f4_not_legal_when_transformed_weights_are_large() -> None:
    """F(4x4)'s 36/9 weights past `MAX_WEIGHTS4` (few tiles per weight, f32 error):
    F(2x2) only."""
    sched = schedule(_conv_graph(256, 256, 6, 6, residual=False))
    (k,) = [k for k in sched.kernels if k.kind == "contraction"]
    assert winograd.legal(sched, k) and not winograd.legal(sched, k, "winograd4")
    cands = candidates(sched, k, FEATURES)
    assert Variant(impl="winograd") in cands and Variant(impl="winograd4") not in cands


@pytest.mark.skipif(not ISA.name, reason="no vector ISA")
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("impl", list(winograd.TILE))
def test_winograd_widens_a_narrow_weight(precision: str, impl: str) -> None:
    """A reduced-precision build's fp16/bf16 weight is widened as it is transformed: the
    result is the lowered graph's (`ir.precision`), as the reference computes it."""
    from luminal.compiler.ir.precision import Precision, lower

    g = lower(_conv_graph(24, 40, 14, 14), Precision(precision))
    sched = schedule(g)
    names = _convs(sched)
    kernel = next(k for k in sched.kernels if k.name == names[0])
    assert winograd.legal(sched, kernel, impl)
    variants = {names[0]: Variant(impl=impl)}
    options = codegen.options_for(FEATURES, True, variants=variants)
    feeds = _feeds(g)
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-2, atol=1e-2)
