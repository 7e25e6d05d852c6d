"""The generated GEMM's row blocks (`gemm.row_block`): blocks of at least 4 row tiles up to
`MIN_ITEMS` work items, and where that leaves few items, the blocks that split them evenly
over the threads.  A 1x1 convolution of 960 -> 160 channels at 7x7 in 5 column tiles of
49 rows was 5 items (3 on one of two threads, 2 on the other); as 10 it is built, run on
the thread pool and equal to the reference interpreter."""

from __future__ import annotations

import re

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, gemm, simd, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import schedule
from luminal.compiler.schedule.variant import Variant

FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())


def _items(m_: int, tiles: int, mr: int, others: int) -> int:
    return others * -(-m_ // gemm.row_block(m_, tiles, mr, others))


def test_few_items_are_split_evenly_over_the_threads() -> None:
    # 49 rows in 4 tiles of 13 beside 5 column tiles: 2 blocks of 2 tiles, 10 items
    assert gemm.row_block(49, 4, 13, 5) == 26 and _items(49, 4, 13, 5) == 10
    # 9 tiles of 6 beside 3 column tiles: 2 blocks (6 items), not 3 (9: 5 on one thread)
    assert _items(49, 9, 6, 3) == 6
    # never below 2 tiles per block: 3 tiles stay one block
    assert gemm.row_block(39, 3, 13, 5) == 39


def test_enough_items_keep_blocks_of_four_tiles() -> None:
    # 64 tiles beside one column tile: 16 blocks of 4 tiles, as before
    assert gemm.row_block(512, 64, 8, 1) == 32 and _items(512, 64, 8, 1) == 16
    # 16 column tiles are items enough: one block
    assert gemm.row_block(49, 4, 13, 16) == 52


def _conv1x1_residual(cin: int, cout: int, h: int) -> Graph:
    rng = np.random.default_rng(cin + cout)
    b = GraphBuilder()
    img = b.input("img", (1, cin, h, h), DType.F32)
    wt = b.const((rng.standard_normal((cout, cin, 1, 1)) * 0.1).astype(np.float32))
    bias = b.const(rng.standard_normal(cout).astype(np.float32))
    y = C.conv(b, img, wt, bias, (1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    y = m.relu(b, m.add(b, y, b.input("res", y.shape, DType.F32)))
    return b.build({"o": y})


@pytest.mark.skipif(not simd.isa_for(FEATURES).name, reason="the generated GEMM needs a vector ISA")
def test_a_balanced_split_computes_the_reference() -> None:
    g = _conv1x1_residual(96, 160, 7)
    sched = schedule(g)
    (kernel,) = [k for k in sched.kernels if k.kind == "contraction"]
    variant = Variant(impl="generated", mr=14, nr=32)
    options = codegen.options_for(FEATURES, True, variants={kernel.name: variant})
    source = codegen.generate_kernel(sched, kernel, options, variant)
    # 5 column tiles x 2 row blocks, on the pool
    assert re.search(r"lum_parallel\(10, ", source), source
    rng = np.random.default_rng(3)
    feeds = {n: rng.standard_normal(g.nodes[i].shape).astype(np.float32) for n, i in g.inputs}
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    np.testing.assert_allclose(got["o"], reference.run(g, feeds)["o"], rtol=1e-4, atol=1e-4)
