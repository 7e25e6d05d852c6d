"""Epilogue fusion (`schedule.fuse_epilogues`): a reduction's one elementwise reader, when
it reads the result only at its own element, is computed inside the reduction's kernel
and the reduction's buffer disappears; anything else keeps two kernels.  Every case is
also compiled and run against the reference interpreter, since a wrong fusion is a wrong
value, not only a different kernel count."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from luminal.compiler.ir import DType, Graph, Op, interpreter
from luminal.compiler.ir.builder import GraphBuilder, Value
from luminal.compiler.schedule import Kernel, Schedule, schedule
from tests.helpers.compiled import compile_and_run

RNG = np.random.default_rng(0)
M, K, N = 4, 8, 16


def matmul(b: GraphBuilder, x: Value, w: Value) -> Value:
    """x @ w as the IR spells it: a SUM over a MUL of two broadcast operands."""
    (m, k), (_, n) = x.shape, w.shape
    xe = b.expand(b.reshape(x, (m, k, 1)), (m, k, n))
    we = b.expand(b.reshape(w, (1, k, n)), (m, k, n))
    return b.reshape(b.reduce(Op.SUM, b.binary(Op.MUL, xe, we), [1]), (m, n))


def weights(b: GraphBuilder, *shape: int) -> Value:
    return b.const(RNG.standard_normal(shape).astype(np.float32))


def broadcast(b: GraphBuilder, v: Value, shape: tuple[int, ...]) -> Value:
    return b.expand(b.reshape(v, (1,) * (len(shape) - v.ndim) + v.shape), shape)


def relu(b: GraphBuilder, v: Value) -> Value:
    return b.binary(Op.MAX, v, broadcast(b, b.const(np.float32(0)), v.shape))


def sum_node(g: Graph) -> int:
    (i,) = [i for i, n in enumerate(g.nodes) if n.op is Op.SUM]
    return i


def assert_runs_like_the_interpreter(g: Graph, tmp: Path) -> None:
    feeds = {"x": RNG.standard_normal((M, K)).astype(np.float32)}
    got, want = compile_and_run(g, feeds, tmp), interpreter.run(g, feeds)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)


def kernels_reading(s: Schedule, node: int) -> list[Kernel]:
    return [k for k in s.kernels if node in k.reads]


def test_bias_and_relu_after_a_matmul_are_one_kernel(tmp_path: Path) -> None:
    b = GraphBuilder()
    x, w, bias = b.input("x", (M, K), DType.F32), weights(b, K, N), weights(b, N)
    g = b.build({"y": relu(b, b.binary(Op.ADD, matmul(b, x, w), broadcast(b, bias, (M, N))))})
    s = schedule(g)
    (k,) = s.kernels
    assert k.kind == "contraction" and k.contraction is not None
    assert k.reduction == sum_node(g) and k.node == g.outputs[0][1]
    assert sorted(g.nodes[r].op.value for r in k.reads) == ["const", "const", "input"]
    # the matmul's result never touches memory
    assert sum_node(g) not in s.homes and s.arena_bytes == 0
    assert s.to_json()["fused_epilogues"] == 1
    assert_runs_like_the_interpreter(g, tmp_path)


def test_an_epilogue_after_a_plain_reduction_is_fused_too(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input("x", (M, K), DType.F32)
    total = b.reduce(Op.SUM, x, [1])  # [M, 1]
    g = b.build({"y": b.binary(Op.MUL, total, weights(b, M, 1))})
    (k,) = schedule(g).kernels
    assert k.kind == "reduce" and k.reduction == sum_node(g)
    assert_runs_like_the_interpreter(g, tmp_path)


def test_a_consumer_reading_the_result_at_another_index_is_not_fused(tmp_path: Path) -> None:
    """A transpose of the matmul: element (j, i) of the epilogue needs element (i, j) of
    the contraction, which another program instance / tile computes."""
    b = GraphBuilder()
    x = b.input("x", (M, K), DType.F32)
    mm = matmul(b, x, weights(b, K, N))
    g = b.build({"y": b.binary(Op.ADD, b.permute(mm, (1, 0)), weights(b, N, M))})
    s = schedule(g)
    assert [k.kind for k in s.kernels] == ["contraction", "elementwise"]
    assert all(k.reduction is None for k in s.kernels)
    assert s.kernels[0].node == sum_node(g) and s.kernels[0].dest.kind == "arena"
    assert kernels_reading(s, sum_node(g)) == [s.kernels[1]]
    assert_runs_like_the_interpreter(g, tmp_path)


def test_a_result_with_a_second_consumer_keeps_its_buffer(tmp_path: Path) -> None:
    """Two kernels read the matmul: fusing into one would leave the other without it."""
    b = GraphBuilder()
    x = b.input("x", (M, K), DType.F32)
    mm = matmul(b, x, weights(b, K, N))
    y = relu(b, b.binary(Op.ADD, mm, broadcast(b, weights(b, N), (M, N))))
    z = b.binary(Op.MUL, mm, weights(b, M, N))
    g = b.build({"y": y, "z": z})
    s = schedule(g)
    assert [k.kind for k in s.kernels] == ["contraction", "elementwise", "elementwise"]
    assert all(k.reduction is None for k in s.kernels)
    assert len(kernels_reading(s, sum_node(g))) == 2
    assert s.homes[sum_node(g)].kind == "arena"
    assert_runs_like_the_interpreter(g, tmp_path)


def test_a_reduction_that_is_an_output_is_not_fused_away(tmp_path: Path) -> None:
    """Its one reader would qualify, but the caller wants the reduction itself."""
    b = GraphBuilder()
    x = b.input("x", (M, K), DType.F32)
    total = b.reduce(Op.SUM, x, [1])
    g = b.build({"total": total, "y": b.binary(Op.MUL, total, weights(b, M, 1))})
    s = schedule(g)
    assert [k.kind for k in s.kernels] == ["reduce", "elementwise"]
    assert all(k.reduction is None for k in s.kernels)
    assert s.kernels[0].dest.kind == "output"
    assert_runs_like_the_interpreter(g, tmp_path)


def test_an_output_copy_after_a_fusion_gets_a_name_of_its_own(tmp_path: Path) -> None:
    """Fusion keeps the fused kernel's name (k1 here) and drops one kernel, so naming the
    output copy of an input by the kernel count gave it k1 too: two C functions `k1`, and
    the build failed (a quantized model with its intermediate values exposed as outputs)."""
    b = GraphBuilder()
    x = b.input("x", (M, K), DType.F32)
    y = relu(b, matmul(b, x, weights(b, K, N)))
    g = b.build({"y": y, "x_again": x})
    s = schedule(g)
    names = [k.name for k in s.kernels]
    assert len(names) == len(set(names)) == 2, names
    assert_runs_like_the_interpreter(g, tmp_path)
