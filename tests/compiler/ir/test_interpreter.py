"""The reference interpreter: each op's meaning, checked against plain numpy."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.ir import DType, GraphBuilder, Op, Value, interpreter
from luminal.compiler.ir.ops import ARITY
from luminal.errors import UsageError

R = np.random.default_rng(1)


def run1(build, *arrays: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Build a graph over inputs a0, a1, ... with `build(b, *values)` and run it."""
    b = GraphBuilder(fold=False)
    values = [b.input(f"a{i}", a.shape, DType.from_numpy(a.dtype)) for i, a in enumerate(arrays)]
    graph = b.build({"out": build(b, *values)})
    return interpreter.run(graph, {f"a{i}": a for i, a in enumerate(arrays)})["out"]


def test_every_op_has_semantics() -> None:
    assert set(interpreter._EVAL) | {Op.INPUT, Op.CONST} == set(Op)
    assert set(ARITY) == set(Op)


@pytest.mark.parametrize(
    ("op", "fn"),
    [
        (Op.EXP2, np.exp2),
        (Op.LOG2, np.log2),
        (Op.SIN, np.sin),
        (Op.SQRT, np.sqrt),
        (Op.RECIP, np.reciprocal),
    ],
)
def test_unary(op: Op, fn) -> None:  # type: ignore[no-untyped-def]
    x = R.uniform(0.1, 5, (3, 4)).astype(np.float32)
    np.testing.assert_array_equal(run1(lambda b, v: b.unary(op, v), x), fn(x))


def test_unary_half_precision_computes_in_f32() -> None:
    x = R.uniform(0.1, 5, (8,)).astype(np.float16)
    out = run1(lambda b, v: b.unary(Op.EXP2, v), x)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, np.exp2(x.astype(np.float32)).astype(np.float16))


def test_bf16_roundtrip() -> None:
    x = R.standard_normal(6).astype(np.float32)
    out = run1(
        lambda b, v: b.cast(
            b.binary(Op.ADD, b.cast(v, DType.BF16), b.cast(v, DType.BF16)), DType.F32
        ),
        x,
    )
    import ml_dtypes

    np.testing.assert_array_equal(out, (x.astype(ml_dtypes.bfloat16) * 2).astype(np.float32))


def test_cast_truncates_toward_zero_and_bool_is_nonzero() -> None:
    x = np.array([-2.7, -0.5, 0.0, 0.5, 2.7], np.float32)
    np.testing.assert_array_equal(run1(lambda b, v: b.cast(v, DType.I32), x), [-2, 0, 0, 0, 2])
    np.testing.assert_array_equal(
        run1(lambda b, v: b.cast(v, DType.BOOL), x), [True, True, False, True, True]
    )


def test_mod_and_idiv_follow_c() -> None:
    a = np.array([7, -7, 7, -7, 5], np.int64)
    d = np.array([3, 3, -3, -3, 0], np.int64)
    np.testing.assert_array_equal(
        run1(lambda b, x, y: b.binary(Op.MOD, x, y), a, d), [1, -1, 1, -1, 0]
    )
    np.testing.assert_array_equal(
        run1(lambda b, x, y: b.binary(Op.IDIV, x, y), a, d), [2, -2, -2, 2, 0]
    )
    fa, fd = a[:4].astype(np.float32), d[:4].astype(np.float32)
    np.testing.assert_array_equal(
        run1(lambda b, x, y: b.binary(Op.MOD, x, y), fa, fd), np.fmod(fa, fd)
    )


def test_compare_where_and_bool_arithmetic() -> None:
    a, c = (
        R.standard_normal((4, 5)).astype(np.float32),
        R.standard_normal((4, 5)).astype(np.float32),
    )
    np.testing.assert_array_equal(run1(lambda b, x, y: b.binary(Op.CMPLT, x, y), a, c), a < c)
    np.testing.assert_array_equal(
        run1(lambda b, x, y: b.where(b.binary(Op.CMPLT, x, y), x, y), a, c), np.minimum(a, c)
    )
    p, q = R.random(6) < 0.5, R.random(6) < 0.5
    np.testing.assert_array_equal(run1(lambda b, x, y: b.binary(Op.ADD, x, y), p, q), p | q)
    np.testing.assert_array_equal(run1(lambda b, x, y: b.binary(Op.MUL, x, y), p, q), p & q)


def test_reductions_keep_dims() -> None:
    x = R.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(
        run1(lambda b, v: b.reduce(Op.SUM, v, [0, 2]), x), x.sum((0, 2), keepdims=True), rtol=1e-6
    )
    np.testing.assert_array_equal(
        run1(lambda b, v: b.reduce(Op.RMAX, v, [-1]), x), x.max(-1, keepdims=True)
    )


def test_iota() -> None:
    out = run1(lambda b, v: b.binary(Op.ADD, v, b.iota((2, 3), 1)), np.zeros((2, 3), np.int64))
    np.testing.assert_array_equal(out, [[0, 1, 2], [0, 1, 2]])


def test_gather_scatter() -> None:
    data = R.standard_normal((5, 3)).astype(np.float32)
    idx = np.array([[4, 0], [1, 1]], np.int64)
    np.testing.assert_array_equal(run1(lambda b, d, i: b.gather(d, i, 0), data, idx), data[idx])
    upd = np.ones((2, 3), np.float32)
    sidx = np.array([[0, 1, 2], [4, 3, 2]], np.int64)
    expect = data.copy()
    np.put_along_axis(expect, sidx, upd, axis=0)
    np.testing.assert_array_equal(
        run1(lambda b, d, i, u: b.scatter(d, i, u, 0), data, sidx, upd), expect
    )


def test_gather_out_of_range_is_an_error() -> None:
    with pytest.raises(UsageError, match="out of range"):
        run1(lambda b, d, i: b.gather(d, i, 0), np.zeros((3,), np.float32), np.array([3], np.int64))


def test_views() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(
        run1(lambda b, v: b.permute(v, (2, 0, 1)), x), x.transpose(2, 0, 1)
    )
    np.testing.assert_array_equal(run1(lambda b, v: b.reshape(v, (6, 4)), x), x.reshape(6, 4))
    np.testing.assert_array_equal(
        run1(lambda b, v: b.pad(v, [(0, 0), (1, 0), (0, 2)], -1), x),
        np.pad(x, [(0, 0), (1, 0), (0, 2)], constant_values=-1),
    )
    np.testing.assert_array_equal(
        run1(lambda b, v: b.slice(v, [(1, 1, 1), (2, -1, 3), (0, 2, 2)]), x), x[1:2, 2::-1, 0:4:2]
    )
    y = np.arange(3, dtype=np.float32).reshape(3, 1)
    np.testing.assert_array_equal(
        run1(lambda b, v: b.expand(v, (3, 5)), y), np.broadcast_to(y, (3, 5))
    )


def _contraction(b: GraphBuilder, a: Value, w: Value) -> Value:
    full = (a.shape[0], a.shape[1], w.shape[1])
    lhs = b.expand(b.reshape(a, (*a.shape, 1)), full)
    rhs = b.expand(b.reshape(w, (1, *w.shape)), full)
    return b.reduce(Op.SUM, b.binary(Op.MUL, lhs, rhs), [1])


def test_einsum_shortcut_equals_materialised_product() -> None:
    a = R.standard_normal((6, 7)).astype(np.float32)
    w = R.standard_normal((7, 5)).astype(np.float32)
    fast = run1(_contraction, a, w)
    np.testing.assert_allclose(fast[:, 0, :], a @ w, rtol=1e-5, atol=1e-5)

    def slow(b: GraphBuilder, x: Value, y: Value) -> Value:
        full = (6, 7, 5)
        prod = b.binary(
            Op.MUL, b.expand(b.reshape(x, (6, 7, 1)), full), b.expand(b.reshape(y, (1, 7, 5)), full)
        )
        total = b.reduce(Op.SUM, prod, [1])
        # second consumer of `prod`: the interpreter must materialise it
        return b.binary(
            Op.ADD,
            total,
            b.binary(
                Op.MUL,
                b.reduce(Op.RMAX, prod, [1]),
                b.expand(b.const(np.zeros((1, 1, 1), np.float32)), (6, 1, 5)),
            ),
        )

    np.testing.assert_allclose(run1(slow, a, w), fast, rtol=1e-5, atol=1e-5)


def test_einsum_shortcut_counts_axes_broadcast_in_both_operands() -> None:
    x = R.standard_normal((3, 1)).astype(np.float32)
    y = R.standard_normal((3, 1)).astype(np.float32)

    def build(b: GraphBuilder, p: Value, q: Value) -> Value:
        prod = b.binary(Op.MUL, b.expand(p, (3, 4)), b.expand(q, (3, 4)))
        return b.reduce(Op.SUM, prod, [1])

    np.testing.assert_allclose(run1(build, x, y), (x * y) * 4, rtol=1e-6)


def test_input_checks() -> None:
    b = GraphBuilder()
    x = b.input("x", (2,), DType.F32)
    g = b.build({"y": b.unary(Op.SQRT, x)})
    with pytest.raises(UsageError, match="missing input 'x'"):
        interpreter.run(g, {})
    with pytest.raises(UsageError, match="dtype float64"):
        interpreter.run(g, {"x": np.zeros(2)})
    with pytest.raises(UsageError, match="unknown input"):
        interpreter.run(g, {"x": np.zeros(2, np.float32), "z": np.zeros(1)})
