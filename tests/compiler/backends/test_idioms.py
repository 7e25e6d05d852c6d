"""Composite rounding recognized as one C function (`backends.idioms`, the CPU codegen):
the match, its refusals, and the compiled values against the reference interpreter at
the cases rounding gets wrong (ties, negative ties, values already integral, infinities,
NaN, negative zero)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from luminal.compiler.backends.cpu.codegen import generate, options_for
from luminal.compiler.backends.idioms import Idiom, Idioms
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import special
from luminal.compiler.ir import DType, Graph, GraphBuilder, Op, interpreter
from luminal.compiler.schedule import schedule
from tests.helpers.compiled import compile_and_run

HARD = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 2.0**23 + 1, -(2.0**23) - 1, 1e30]
HARD += [np.inf, -np.inf, np.nan, -0.0, 0.0, 3.7, -3.7, 1e-40]


@pytest.mark.parametrize(
    ("idiom", "fn"),
    [(Idiom.ROUND_HALF_EVEN, special.round_half_even), (Idiom.FLOOR, special.floor)],
)
def test_a_composite_is_matched_on_the_node_it_is_applied_to(idiom, fn) -> None:  # type: ignore[no-untyped-def]
    b = GraphBuilder()
    x = m.mul(b, b.input("x", (4, 5), DType.F32), m.like(b, 3.0, b.input("y", (4, 5), DType.F32)))
    g = b.build({"r": fn(b, x)})
    hit = Idioms(g).match(g.outputs[0][1])
    assert hit is not None and hit.idiom is idiom
    assert g.nodes[hit.x].op is Op.MUL and g.nodes[hit.x].shape == x.shape  # x, not y or 3


def test_a_lookalike_is_not_matched() -> None:
    """The same chain with a different constant (a 2^22 guard) is another function."""
    b = GraphBuilder()
    x = b.input("x", (3,), DType.F32)
    t = b.cast(b.cast(x, DType.I64), DType.F32)
    below = b.cast(b.binary(Op.CMPLT, x, t), DType.F32)
    small = b.binary(Op.CMPLT, m.abs_(b, x), m.like(b, 2.0**22, x))
    g = b.build({"r": b.where(small, m.sub(b, t, below), x)})
    assert Idioms(g).match(g.outputs[0][1]) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_rounding_equals_the_interpreter_at_ties_and_edges(dtype, tmp_path: Path) -> None:
    ir = DType.F32 if dtype == np.float32 else DType.F64
    b = GraphBuilder()
    x = b.input("x", (len(HARD),), ir)
    g = b.build({"even": special.round_half_even(b, x), "floor": special.floor(b, x)})
    source = generate(schedule(g), options_for(("avx2", "fma"), openmp=False))
    assert ("rintf(" if ir is DType.F32 else "rint(") in source
    feeds = {"x": np.array(HARD, dtype)}
    got, want = compile_and_run(g, feeds, tmp_path), interpreter.run(g, feeds)
    for name in want:  # equal values; -0.0 == 0.0 (rint keeps the sign of zero, as numpy)
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    np.testing.assert_array_equal(got["even"], np.rint(feeds["x"]))
    np.testing.assert_array_equal(np.signbit(got["even"]), np.signbit(np.rint(feeds["x"])))
    np.testing.assert_array_equal(got["floor"], np.floor(feeds["x"]))


CLAMP_EDGES = [-0.0, 0.0, 6.0, -6.0, 5.999999, 6.000001, 1e-40, -1e-40, 3.0]
CLAMP_EDGES += [np.inf, -np.inf, np.nan, 1e30, -1e30]


def _clip(lo: float, hi: float, n: int) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (n,), DType.F32)
    return b.build({"r": m.clip(b, x, m.like(b, lo, x), m.like(b, hi, x))})


def test_a_clip_with_constant_bounds_is_a_clamp_of_its_input() -> None:
    g = _clip(0.0, 6.0, 4)
    hit = Idioms(g).clamp(g.outputs[0][1])
    assert hit is not None and (hit.x, hit.lo, hit.hi) == (g.inputs[0][1], 0.0, 6.0)


@pytest.mark.parametrize(("lo", "hi"), [(6.0, 0.0), (2.0, 2.0), (np.nan, 6.0)])
def test_a_clip_whose_bounds_cross_or_are_nan_is_not_a_clamp(lo: float, hi: float) -> None:
    """lo > hi, lo == hi or a NaN bound: the max-then-min order matters there."""
    g = _clip(lo, hi, 4)
    assert Idioms(g).clamp(g.outputs[0][1]) is None


def test_a_minimum_of_two_inputs_is_not_a_clamp() -> None:
    b = GraphBuilder()
    x, z = b.input("x", (4,), DType.F32), b.input("z", (4,), DType.F32)
    g = b.build({"r": m.minimum(b, m.maximum(b, x, m.like(b, 0.0, x)), z)})
    assert Idioms(g).clamp(g.outputs[0][1]) is None


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 6.0), (-1.0, 1.0), (-6.0, -0.0)])
def test_compiled_clamp_equals_the_interpreter_bit_for_bit(
    lo: float, hi: float, tmp_path: Path
) -> None:
    """Every edge (NaN, infinities, the bounds, signed zeros, denormals) and a random
    spread: the same bits as the primitive max-then-min, the sign of zero included."""
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [np.array(CLAMP_EDGES, np.float32), rng.normal(0, 4, 64).astype(np.float32)]
    )
    g = _clip(lo, hi, len(values))
    source = generate(schedule(g), options_for(("avx2", "fma"), openmp=False))
    assert "lum_clampf(" in source
    feeds = {"x": values}
    got, want = compile_and_run(g, feeds, tmp_path)["r"], interpreter.run(g, feeds)["r"]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _logistic_graph(n: int, dtype: DType = DType.F32) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (n,), dtype)
    return b.build({"sig": m.sigmoid(b, x), "silu": m.mul(b, x, m.sigmoid(b, x))})


def test_a_sigmoid_and_a_tanh_end_in_a_logistic_tail() -> None:
    g = _logistic_graph(4)
    sig = dict(g.outputs)["sig"]
    hit = Idioms(g).logistic(sig)
    assert hit is not None and g.nodes[hit.t].op is Op.MUL  # -x * log2(e)
    assert [g.nodes[i].op for i in hit.inner] == [Op.ADD, Op.EXP2]
    b = GraphBuilder()
    t = b.build({"t": m.tanh(b, b.input("x", (4,), DType.F32))})
    assert any(Idioms(t).logistic(i) is not None for i in range(len(t.nodes)))


@pytest.mark.parametrize("kind", ["two plus", "no exp2", "f64"])
def test_lookalikes_are_not_a_logistic_tail(kind: str) -> None:
    """1 / (2 + 2^x) and 1 / (1 + x) are other functions; an f64 sigmoid keeps exp2."""
    b = GraphBuilder()
    x = b.input("x", (4,), DType.F64 if kind == "f64" else DType.F32)
    inner = x if kind == "no exp2" else b.unary(Op.EXP2, x)
    one = m.like(b, 2.0 if kind == "two plus" else 1.0, x)
    g = b.build({"r": m.recip(b, m.add(b, one, inner))})
    assert Idioms(g).logistic(g.outputs[0][1]) is None


def test_compiled_logistic_equals_the_interpreter_within_ulps(tmp_path: Path) -> None:
    """A sigmoid and a SiLU over the whole f32 range: NaN stays NaN, the saturated ends
    are 1 and 0, and every result within 3 ulps of the reference interpreter's (numpy's
    exp2) or, where the sigmoid is below 2^-127.5 (x < -88.37), 0 where it is subnormal."""
    rng = np.random.default_rng(3)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-40, -1e-40]
    edges += [87.0, -87.0, 87.4, -87.4, 88.0, -88.0, 89.0, -89.0, 103.0, -104.0, 0.5]
    values = np.concatenate(
        [
            np.array(edges, np.float32),
            rng.normal(0, 6, 2000).astype(np.float32),
            rng.uniform(-110, 110, 2000).astype(np.float32),
        ]
    )
    g = _logistic_graph(len(values))
    source = generate(schedule(g), options_for(("avx2", "fma"), openmp=False))
    assert "lum_logistic2f(" in source and "lum_exp2f(" not in source.split("lum_run")[-1]
    feeds = {"x": values}
    got, want = compile_and_run(g, feeds, tmp_path), interpreter.run(g, feeds)
    for name in ("sig", "silu"):
        a, w = got[name], want[name]
        np.testing.assert_array_equal(np.isnan(a), np.isnan(w), err_msg=name)
        ok = ~np.isnan(w)
        a, w, x = a[ok].astype(np.float64), w[ok].astype(np.float64), values[ok]
        with np.errstate(invalid="ignore"):
            ulps = np.abs(a - w) / np.spacing(np.abs(w).astype(np.float32)).astype(np.float64)
        tail = np.abs(a - w) <= 4.2e-39 * np.maximum(1, np.abs(x))  # 2^-127.5
        good = (a == w) | (ulps <= 3) | tail
        assert np.all(good), (name, x[~good][:5], a[~good][:5], w[~good][:5])
    assert got["sig"][2] == 1.0 and got["sig"][3] == 0.0  # +inf, -inf
