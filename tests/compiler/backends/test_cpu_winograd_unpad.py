"""Winograd building its padded tile rows from the pad's source (`Variant(impl=winograd*,
unpad=True)`, `winograd.unpad_legal`): offered as the twin of each Winograd variant where
the convolution's pad may be skipped, the pad's kernel dropped, and equal to the
reference interpreter (both tile sizes, odd and even maps, a batch, uneven pads, a fill
of ones, a residual epilogue, threads on and off); not offered where the pad has another
reader."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, simd, toolchain, winograd
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
pytestmark = pytest.mark.skipif(not VECTOR, reason="Winograd needs a vector ISA")


def _graph(
    cin: int,
    cout: int,
    h: int,
    w: int,
    *,
    batch: int = 1,
    pads: tuple[tuple[int, int], tuple[int, int]] = ((1, 1), (1, 1)),
    fill: float = 0.0,
    residual: bool = False,
) -> Graph:
    """A pad (of `fill`) of the input's last two axes, then a 3x3 stride-1 convolution
    over exactly the padded map, bias, an optional residual add, ReLU."""
    rng = np.random.default_rng(cin * 1000 + h + w)
    b = GraphBuilder()
    img = b.input("img", (batch, cin, h, w), DType.F32)
    # the pad from a computed buffer (an input's pad would be the same fold)
    act = m.relu(b, img)
    padded = b.pad(act, ((0, 0), (0, 0), *pads), fill)
    wt = b.const((rng.standard_normal((cout, cin, 3, 3)) * 0.2).astype(np.float32))
    bias = b.const((rng.standard_normal(cout) * 0.2).astype(np.float32))
    y = C.conv(b, padded, wt, bias, (1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    if residual:
        y = m.add(b, y, b.input("res", y.shape, DType.F32))
    return b.build({"o": m.relu(b, y)})


def _conv(sched: Schedule) -> Kernel:
    (kernel,) = [k for k in sched.kernels if k.kind == "contraction"]
    return kernel


@pytest.mark.parametrize("impl", list(winograd.TILE))
@pytest.mark.parametrize(
    "cin,cout,h,w,batch,pads,fill,residual,parallel",
    [
        (8, 24, 14, 14, 1, ((1, 1), (1, 1)), 0.0, False, True),  # even, whole tiles
        (5, 13, 9, 7, 2, ((1, 1), (1, 1)), 0.0, True, True),  # odd: partial tiles; a batch
        (6, 19, 11, 10, 1, ((0, 2), (2, 0)), 0.0, False, False),  # uneven pads, serial
        (4, 16, 8, 12, 2, ((1, 1), (1, 1)), 1.0, True, True),  # a fill of ones
    ],
    ids=str,
)
def test_unpadded_winograd_matches_reference(
    impl: str,
    cin: int,
    cout: int,
    h: int,
    w: int,
    batch: int,
    pads: tuple[tuple[int, int], tuple[int, int]],
    fill: float,
    residual: bool,
    parallel: bool,
) -> None:
    g = _graph(cin, cout, h, w, batch=batch, pads=pads, fill=fill, residual=residual)
    sched = schedule(g)
    kernel = _conv(sched)
    assert kernel.fold is not None and winograd.unpad_legal(sched, kernel, impl)
    variant = Variant(impl=impl, unpad=True, parallel=parallel)
    assert variant.label.endswith("-unpad")
    assert Variant(impl=impl, unpad=True) in candidates(sched, kernel, FEATURES)
    settled, _ = unpad(sched, {kernel.name: variant})
    # the pad's kernel dropped: what is left is the activation and the convolution
    assert len(settled.kernels) == len(sched.kernels) - 1
    assert all(k.node != kernel.fold.pad for k in settled.kernels)
    options = codegen.options_for(FEATURES, True, variants={kernel.name: variant})
    source = codegen.generate(settled, options)
    assert "_wmk" in source and "memcpy(d[i] +" in source
    rng = np.random.default_rng(3)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    got = NativeLibrary.build(settled, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=2e-4)


def test_not_offered_where_the_pad_has_another_reader() -> None:
    """Two convolutions over one pad: neither may skip it (the pad is written anyway),
    so Winograd is offered reading the pad only."""
    rng = np.random.default_rng(5)
    b = GraphBuilder()
    img = b.input("img", (1, 8, 12, 12), DType.F32)
    padded = b.pad(m.relu(b, img), ((0, 0), (0, 0), (1, 1), (1, 1)), 0.0)
    ys = [
        C.conv(
            b,
            padded,
            b.const((rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)),
            None,
            (1, 1),
            ((0, 0), (0, 0)),
            (1, 1),
            1,
        )
        for _ in range(2)
    ]
    g = b.build({"o": m.add(b, *ys)})
    sched = schedule(g)
    convs = [k for k in sched.kernels if k.kind == "contraction"]
    assert convs and all(k.fold is None for k in convs)
    for k in convs:
        offered = candidates(sched, k, FEATURES)
        assert not any(winograd.unpad_legal(sched, k, i) for i in winograd.TILE)
        assert not any(v.unpad and v.impl in winograd.TILE for v in offered)
