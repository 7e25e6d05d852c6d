"""A full register tile whose rows are one stride apart in X reads them from one pointer at
constant displacements (`gemm._Gemm._row_stride`): always for a matmul's rows, after a
per-tile check where a tile may cross an output row (a padded convolution's positions, a
band's short tile repeating its last position), with the row-pointer kernel kept for the
tiles that fail it.  Equal to the reference interpreter on both paths."""

from __future__ import annotations

import re

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, simd, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Schedule, schedule, unpad
from luminal.compiler.schedule.variant import Variant

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())
pytestmark = pytest.mark.skipif(
    not simd.isa_for(FEATURES).name, reason="the generated GEMM needs a vector ISA"
)


def _matmul(m_: int, k: int, n: int) -> Graph:
    rng = np.random.default_rng(m_ + k + n)
    b = GraphBuilder()
    x = b.input("x", (m_, k), DType.F32)
    w = b.const(rng.standard_normal((k, n)).astype(np.float32))
    return b.build({"o": C.matmul(b, x, w)})


def _conv(cin: int, cout: int, h: int, w: int) -> Graph:
    rng = np.random.default_rng(cin + cout + h + w)
    b = GraphBuilder()
    img = b.input("img", (1, cin, h, w), DType.F32)
    wt = b.const((rng.standard_normal((cout, cin, 3, 3)) * 0.3).astype(np.float32))
    bias = b.const(rng.standard_normal(cout).astype(np.float32))
    y = C.conv(b, img, wt, bias, (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    return b.build({"o": m.relu(b, y)})


def _source_and_check(g: Graph, sched: Schedule, variant: Variant) -> str:
    """The contraction's C source with `variant`, after checking the built kernel against
    the reference interpreter."""
    (kernel,) = [k for k in sched.kernels if k.kind == "contraction"]
    options = codegen.options_for(FEATURES, True, variants={kernel.name: variant})
    rng = np.random.default_rng(3)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-4)
    return codegen.generate_kernel(sched, kernel, options, variant)


def _micro_calls(source: str) -> list[str]:
    """The micro-kernels the row tiles call, in the order of their conditions."""
    return re.findall(r"if \([^)]*\) (\w+_mk\w+)\(xr,", source)


def test_matmul_rows_always_strided() -> None:
    """A matmul's rows are K apart in every full tile: only the strided kernel, no check.
    50 rows in tiles of 8 also leave a short tile, which keeps its row pointers."""
    g = _matmul(50, 37, 64)
    source = _source_and_check(g, schedule(g), Variant(mr=8, nr=32))
    calls = _micro_calls(source)
    assert "uni" not in source
    assert re.fullmatch(r"\w+_mk\d+x\d+s(37|64)", calls[0]), calls
    assert all(not re.search(r"s\d+$", c) for c in calls[1:]), calls
    assert re.search(r"LUM_VBCAST\(x0\[o \+ \d+\]\)", source)


def test_padded_convolution_checks_each_tile() -> None:
    """A 3x3 convolution read through its pad: positions one apart within an output row
    of 10, two more across it, so 8-row tiles that cross a row take the row pointers."""
    g = _conv(4, 32, 9, 10)
    source = _source_and_check(g, schedule(g), Variant(mr=8, nr=32))
    calls = _micro_calls(source)
    assert "uni &= xr[i] == xr[0] + i * 1;" in source
    assert calls[0].endswith("s1") and not calls[1].endswith("s1"), calls


def test_slab_band_tiles_checked() -> None:
    """`unpad`: a band's 12-row tiles over output rows of 20 cross rows, and its short
    tile repeats the band's last position; both fall back to the row pointers."""
    g = _conv(8, 32, 25, 20)
    sched = schedule(g)
    (kernel,) = [k for k in sched.kernels if k.kind == "contraction"]
    variant = Variant(mr=12, nr=32, unpad=True)
    settled, _ = unpad(sched, {kernel.name: variant})
    source = _source_and_check(g, settled, variant)
    assert "float slab[" in source and "uni &= xr[i] == xr[0] + i * 1;" in source
