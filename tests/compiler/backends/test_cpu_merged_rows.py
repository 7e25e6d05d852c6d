"""An elementwise kernel runs its innermost output loops as one where every buffer it reads
steps through them as one (`codegen._merged_rows`): an SE block's per-channel scale of a
7x7 map is one 49-lane loop, not seven loops of 7.  Results against the reference
interpreter, NaN included."""

from __future__ import annotations

import re

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import schedule

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())


def scaled(shape: tuple[int, int, int, int]) -> Graph:
    """x * s per (image, channel), plus a residual: an SE block's scale."""
    b = GraphBuilder()
    x = b.input("x", shape, DType.F32)
    s = b.input("s", (*shape[:2], 1, 1), DType.F32)
    r = b.input("r", shape, DType.F32)
    return b.build({"y": m.add(b, m.mul(b, x, s), r)})


def loops(graph: Graph) -> list[tuple[str, str]]:
    source = codegen.generate(schedule(graph), codegen.CodegenOptions())
    kernels = source.split("static int k", 1)[1]  # after the prelude
    return re.findall(r"for \(int64_t (i\d+) = (?:0|lum_lo); \1 < (\w+);", kernels)


def test_a_map_read_whole_is_one_loop() -> None:
    # the map's rows and columns merge; the channels do not (the scale moves along them)
    assert loops(scaled((2, 5, 7, 7)))[1:] == [("i1", "5"), ("i23", "49")]


def test_a_transposed_read_keeps_its_loops() -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 7, 7), DType.F32)
    graph = b.build({"y": m.relu(b, b.permute(x, (0, 2, 1)))})
    assert [n for n, _ in loops(graph)] == ["i0", "i1", "i2"]


def test_a_whole_tensor_read_in_order_is_one_loop() -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 5, 7), DType.F32)
    graph = b.build({"y": m.relu(b, m.add(b, x, x))})
    assert [n for n, _ in loops(graph)] == ["i0123"]


@pytest.mark.parametrize("shape", [(2, 5, 7, 7), (1, 3, 14, 14), (3, 2, 1, 9)])
def test_merged_loops_match_the_reference(shape: tuple[int, int, int, int]) -> None:
    graph = scaled(shape)
    rng = np.random.default_rng(3)
    feeds = {
        "x": rng.standard_normal(shape).astype(np.float32),
        "s": rng.standard_normal((*shape[:2], 1, 1)).astype(np.float32),
        "r": rng.standard_normal(shape).astype(np.float32),
    }
    feeds["x"].flat[-1] = np.nan
    options = codegen.options_for(FEATURES, True)
    got = NativeLibrary.build(schedule(graph), options, FLAGS).run(feeds)["y"]
    want = reference.run(graph, feeds)["y"]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
