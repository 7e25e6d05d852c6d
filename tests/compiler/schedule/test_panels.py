"""Short contractions with a constant weight read it from column panels: the plan's
re-laid weight is [N/32, K, 32] blocks, the product is exact against the reference
interpreter, and longer or ragged products keep the row-major layout.  An N that 32 does
not divide (an ImageNet head's 1000 classes) takes the narrowest multiple of 8 above 32
that does: 25 panels of 40."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import luminal
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.ir import DType, Graph, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.compiler.schedule import schedule
from luminal.compiler.schedule.contraction import PANEL, PANEL_ROWS, panel_width


def _gemv(rows: int, k: int, n: int, seed: int = 0) -> tuple[Graph, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = GraphBuilder()
    x = b.input("x", (rows, k), DType.F32)
    y = C.matmul(b, x, b.const(w))
    return b.build({"y": m.relu(b, y)}), w


def _plan(g: Graph):  # type: ignore[no-untyped-def]
    (kernel,) = [k for k in schedule(g).kernels if k.kind == "contraction"]
    return kernel.contraction


def test_a_gemv_reads_its_weight_in_panels() -> None:
    g, w = _gemv(1, 40, 96)
    p = _plan(g)
    assert p.n.size == PANEL and p.packed is not None
    assert p.packed.shape == (96 // PANEL, 40, PANEL)
    np.testing.assert_array_equal(p.packed[1], w[:, PANEL : 2 * PANEL])  # one contiguous panel


@pytest.mark.parametrize(
    ("n", "width"),
    [(96, 32), (1000, 40), (1008, 48), (120, 40), (32, None), (50, None), (1001, None)],
)
def test_panel_width_divides_n_in_whole_vectors(n: int, width: int | None) -> None:
    assert panel_width(n) == width


def test_an_imagenet_head_reads_its_weight_in_panels_of_40() -> None:
    g, w = _gemv(1, 24, 1000)
    p = _plan(g)
    assert p.n.size == 40 and p.packed is not None
    assert p.packed.shape == (25, 24, 40)
    np.testing.assert_array_equal(p.packed[3], w[:, 120:160])


def test_a_serving_batch_head_reads_its_weight_in_panels() -> None:
    """Eight rows (an ImageNet head at batch 8) is one row tile: panels too."""
    g, w = _gemv(8, 24, 1000)
    p = _plan(g)
    assert PANEL_ROWS >= 8 and p.n.size == 40 and p.packed is not None
    np.testing.assert_array_equal(p.packed[3], w[:, 120:160])


@pytest.mark.parametrize(("rows", "n"), [(PANEL_ROWS + 1, 96), (1, 50)])
def test_long_or_ragged_products_keep_the_plain_layout(rows: int, n: int) -> None:
    p = _plan(_gemv(rows, 40, n)[0])
    assert p.n.size == n


@pytest.mark.parametrize(("rows", "n"), [(1, 128), (3, 128), (1, 120), (8, 1000)])
def test_panel_products_are_exact_against_the_reference(rows: int, n: int, tmp_path: Path) -> None:
    g, _ = _gemv(rows, 77, n, seed=rows)
    x = np.random.default_rng(5).standard_normal((rows, 77)).astype(np.float32)
    want = reference.run(g, {"x": x})["y"]
    out = tmp_path / "gemv.lmnl"
    compile_model(LoadedModel(g, "test", "test"), out, CompileOptions())
    got = luminal.load(out).run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
