"""Pads a contraction may read through (`schedule/unpad.py`): marked by the schedule with
the source kept alive until the contraction runs, settled by the chosen variant
(`schedule.unpad`: the pad's kernel dropped, or the source no longer read), and the
settled model equal to the reference with its arena planned for what it reads."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, simd, stencil, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder, numel
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Kernel, Schedule, schedule, unpad
from luminal.compiler.schedule.variant import Variant

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())
HAS_STENCIL = bool(simd.isa_for(FEATURES).loadn)


def _block(c: int = 8, h: int = 20, w: int = 20, *, pad_output: bool = False) -> Graph:
    """A 1x1 expansion with ReLU, a padded 3x3 depthwise convolution with ReLU, a 1x1
    projection: mobilenet's block, whose pad reads the expansion's buffer."""
    rng = np.random.default_rng(5)
    b = GraphBuilder()
    x = b.input("x", (1, 4, h, w), DType.F32)
    w1 = b.const((rng.standard_normal((c, 4, 1, 1)) * 0.4).astype(np.float32))
    e = m.relu(b, C.conv(b, x, w1, None, (1, 1), ((0, 0), (0, 0)), (1, 1), 1))
    w2 = b.const((rng.standard_normal((c, 1, 3, 3)) * 0.4).astype(np.float32))
    y = m.relu(b, C.conv(b, e, w2, None, (1, 1), ((1, 1), (1, 1)), (1, 1), c))
    w3 = b.const((rng.standard_normal((4, c, 1, 1)) * 0.4).astype(np.float32))
    outs = {"o": C.conv(b, y, w3, None, (1, 1), ((0, 0), (0, 0)), (1, 1), 1)}
    if pad_output:  # the padded tensor is read by a second kernel: the pad must stay
        outs["p"] = b.pad(e, ((0, 0), (0, 0), (1, 1), (1, 1)))
    return b.build(outs)


def _depthwise(sched: Schedule) -> Kernel:
    return [k for k in sched.kernels if k.kind == "contraction"][1]


def _span(sched: Schedule, node: int) -> tuple[int, int]:
    home = sched.homes[node]
    assert home.kind == "arena"
    n = sched.graph.nodes[node]
    return home.index, home.index + numel(n.shape) * n.dtype.itemsize


def test_the_schedule_marks_the_pad_and_keeps_its_source_alive() -> None:
    sched = schedule(_block())
    k = _depthwise(sched)
    f = k.fold
    assert f is not None and f.source in k.reads and f.pad in k.reads
    assert [x.name for x in sched.kernels if x.node == f.pad] == [f.kernel]
    # the source is alive while the contraction writes: their arena slots are disjoint
    (a, b), (c, d) = _span(sched, f.source), _span(sched, f.pad)
    assert b <= c or d <= a


def test_settled_without_unpadding_the_kernel_reads_the_pad_as_planned() -> None:
    sched = schedule(_block())
    k = _depthwise(sched)
    assert k.fold is not None
    settled, _ = unpad(sched, {})
    assert [x.name for x in settled.kernels] == [x.name for x in sched.kernels]
    again = _depthwise(settled)
    assert again.fold is None and k.fold.source not in again.reads and k.fold.pad in again.reads
    assert settled.arena_bytes <= sched.arena_bytes


@pytest.mark.skipif(not HAS_STENCIL, reason="no vector ISA with masked loads")
@pytest.mark.parametrize("impl", [stencil.IMPL, "generated"])
def test_settled_models_match_the_reference(impl: str) -> None:
    """Unpadding drops the pad's kernel and its buffer; the source's slot is not reused
    by the contraction's output (the hazard an arena planned for the pad would have)."""
    g = _block()
    sched = schedule(g)
    k = _depthwise(sched)
    assert k.fold is not None
    variant = Variant(impl=impl, unpad=impl == stencil.IMPL)
    pad_variant = Variant(parallel=False)  # what the search chose for the pad's kernel
    settled, kept = unpad(sched, {k.name: variant, k.fold.kernel: pad_variant})
    names = [x.name for x in settled.kernels]
    assert (k.fold.kernel in names) is not variant.unpad
    assert set(kept) <= set(names) and kept[k.name] == variant  # no variant of a dropped one
    if variant.unpad:
        assert k.fold.pad not in settled.homes
        (a, b), (c, d) = _span(settled, k.fold.source), _span(settled, _depthwise(settled).node)
        assert b <= c or d <= a
    options = codegen.options_for(FEATURES, True, variants={k.name: variant})
    rng = np.random.default_rng(9)
    feeds = {"x": rng.standard_normal((1, 4, 20, 20)).astype(np.float32)}
    got = NativeLibrary.build(settled, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-5)


def test_a_pad_another_kernel_reads_is_not_marked() -> None:
    sched = schedule(_block(pad_output=True))
    assert _depthwise(sched).fold is None


def test_a_pad_along_the_channels_is_not_marked() -> None:
    """Only the last two axes may be padded: the rows an item builds are of one plane."""
    rng = np.random.default_rng(2)
    b = GraphBuilder()
    x = b.input("x", (1, 4, 9, 9), DType.F32)
    e = m.relu(b, x)
    p = b.pad(e, ((0, 0), (1, 1), (1, 1), (1, 1)))  # 6 channels, 11x11
    wt = b.const((rng.standard_normal((6, 1, 3, 3))).astype(np.float32))
    y = C.conv(b, p, wt, None, (1, 1), ((0, 0), (0, 0)), (1, 1), 6)
    sched = schedule(b.build({"o": y}))
    assert all(k.fold is None for k in sched.kernels)
