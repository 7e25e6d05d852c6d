"""A contraction's other orientations: planned by the schedule, offered to the search,
generated correctly, and settled (`orient`) so the artifact keeps only the weights the
chosen orientation reads."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.backends.cpu.variants import candidates
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Kernel, Schedule, orient, schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())


def _pointwise_conv(cin: int, cout: int, h: int, w: int) -> Graph:
    """A 1x1 convolution with bias and ReLU, NCHW: the shape mobilenet's expansions have."""
    rng = np.random.default_rng(cin * 7 + cout)
    b = GraphBuilder()
    img = b.input("img", (1, cin, h, w), DType.F32)
    wt = b.const((rng.standard_normal((cout, cin, 1, 1)) * 0.3).astype(np.float32))
    bias = b.const((rng.standard_normal(cout) * 0.2).astype(np.float32))
    y = C.conv(b, img, wt, bias, (1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    return b.build({"o": m.relu(b, y)})


def _contraction(sched: Schedule) -> Kernel:
    (k,) = [k for k in sched.kernels if k.kind == "contraction"]
    return k


def test_a_pointwise_conv_runs_along_the_positions_or_the_channels() -> None:
    g = _pointwise_conv(24, 40, 6, 20)
    plain, searched = schedule(g), schedule(g, alternatives=True)
    k = _contraction(searched)
    assert _contraction(plain).alternatives == ()
    default = _contraction(plain).contraction
    assert (k.contraction.m, k.contraction.n) == (default.m, default.n)  # unchanged
    (alt,) = k.alternatives
    # the output positions (h, w) are one loop: the image's 120 positions, not rows of 20
    assert {alt.n.size, k.contraction.n.size} == {6 * 20, 40}
    # one orientation stores contiguously along its vector loop (the positions), the
    # other along the output channels
    contiguous = [abs(p.loops.out.coeff(p.n)) == 1 for p in (k.contraction, alt)]
    assert sorted(contiguous) == [False, True]
    assert Variant(orient=1) in candidates(searched, k, FEATURES)


@pytest.mark.parametrize("shape", [(24, 40, 6, 20), (16, 8, 3, 5)], ids=str)
@pytest.mark.parametrize("orientation", [0, 1])
def test_each_orientation_matches_the_reference(
    shape: tuple[int, int, int, int], orientation: int
) -> None:
    g = _pointwise_conv(*shape)
    searched = schedule(g, alternatives=True)
    k = _contraction(searched)
    chosen = {k.name: Variant(orient=orientation)}
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    want = reference.run(g, feeds)["o"]
    # as the search times it (every orientation's weights present) ...
    options = codegen.options_for(FEATURES, True, variants=chosen)
    got = NativeLibrary.build(searched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], want, rtol=1e-4, atol=1e-5)
    # ... and as the artifact holds it, settled
    settled, variants = orient(searched, chosen)
    assert all(v.orient == 0 for v in variants.values())
    assert all(k.alternatives == () for k in settled.kernels)
    options = codegen.options_for(FEATURES, True, variants=variants)
    got = NativeLibrary.build(settled, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], want, rtol=1e-4, atol=1e-5)


def test_settling_keeps_only_the_weights_the_chosen_orientation_reads() -> None:
    g = _pointwise_conv(24, 40, 6, 20)
    plain, searched = schedule(g), schedule(g, alternatives=True)
    # the default reads a packed copy of the weights, the alternative the originals
    assert searched.weights_bytes > plain.weights_bytes
    default, _ = orient(searched, {})
    assert default.weights_bytes == plain.weights_bytes
    assert default.weights_blob() == plain.weights_blob()
    other, _ = orient(searched, {_contraction(searched).name: Variant(orient=1)})
    assert other.weights_bytes <= plain.weights_bytes
    assert orient(searched, {})[1] == {}
    assert orient(searched, {"k0": DEFAULT})[1] == {}


def test_a_token_matmul_stores_without_division() -> None:
    """A linear layer over [1, H, W, C] tokens (convnext's MLP): the positions merge into
    one loop of rows, and the fused epilogue's store stays affine.  Rebuilt from the
    unflattened index it kept a division per element and ran 7x slower."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 16), DType.F32)
    w = b.const((rng.standard_normal((16, 32)) * 0.3).astype(np.float32))
    bias = b.const((rng.standard_normal(32) * 0.2).astype(np.float32))
    y = m.relu(b, m.add(b, C.matmul(b, x, w), bias))
    g = b.build({"o": y})
    sched = schedule(g)
    k = _contraction(sched)
    assert 64 in {v.size for v in k.contraction.loops.loops}  # 8 x 8 positions, one loop
    source = codegen.generate(sched, codegen.options_for(FEATURES, True))
    stores = [ln.split("out[", 1)[1].split("]", 1)[0] for ln in source.splitlines() if "out[" in ln]
    assert stores and not any("/" in s or "%" in s for s in stores), stores
    feeds = {"x": rng.standard_normal((1, 8, 8, 16)).astype(np.float32)}
    got = NativeLibrary.build(sched, codegen.options_for(FEATURES, True), FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-5)
