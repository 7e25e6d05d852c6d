"""Elementwise kernels that read through permutes and broadcasts (the attention head
split and merge, transposes, broadcast biases), compiled to C and run natively, against
the reference interpreter."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, Graph, Op, interpreter
from luminal.compiler.ir.builder import GraphBuilder, Value
from luminal.compiler.schedule import schedule


def _head_split(b: GraphBuilder) -> tuple[dict[str, Value], Value]:
    x = b.input("x", (1, 128, 12, 64), DType.F32)
    one = b.expand(b.const(np.ones((1, 1, 1, 1), np.float32)), (1, 12, 128, 64))
    return {"x": x}, b.binary(Op.ADD, b.permute(x, (0, 2, 1, 3)), one)


def _head_merge(b: GraphBuilder) -> tuple[dict[str, Value], Value]:
    x = b.input("x", (1, 12, 128, 64), DType.F32)
    bias = b.input("bias", (1, 1, 768), DType.F32)
    merged = b.reshape(b.permute(x, (0, 2, 1, 3)), (1, 128, 768))
    return {"x": x, "bias": bias}, b.binary(Op.ADD, merged, b.expand(bias, (1, 128, 768)))


def _transpose(b: GraphBuilder) -> tuple[dict[str, Value], Value]:
    x = b.input("x", (64, 768), DType.F32)
    y = b.input("y", (768, 64), DType.F32)
    return {"x": x, "y": y}, b.binary(Op.MUL, b.permute(x, (1, 0)), y)


def _broadcast_permute(b: GraphBuilder) -> tuple[dict[str, Value], Value]:
    col = b.input("col", (64, 1), DType.F32)
    y = b.input("y", (768, 64), DType.F32)
    wide = b.permute(b.expand(col, (64, 768)), (1, 0))
    return {"col": col, "y": y}, b.binary(Op.MAX, y, wide)


def _exp2_permuted(b: GraphBuilder) -> tuple[dict[str, Value], Value]:
    x = b.input("x", (1, 12, 64, 64), DType.F32)
    y = b.input("y", (1, 64, 12, 64), DType.F32)
    e = b.unary(Op.EXP2, x)
    return {"x": x, "y": y}, b.binary(Op.MUL, e, b.permute(y, (0, 2, 1, 3)))


CASES: dict[str, Callable[[GraphBuilder], tuple[dict[str, Value], Value]]] = {
    "head-split-1x128x12x64": _head_split,
    "head-merge-1x12x128x64": _head_merge,
    "transpose-64x768": _transpose,
    "broadcast-permute-64x1": _broadcast_permute,
    "exp2-times-permute": _exp2_permuted,
}


def _graph(case: str) -> Graph:
    b = GraphBuilder()
    _, out = CASES[case](b)
    return b.build({"out": out})


@pytest.mark.parametrize("threads", [True, False], ids=["pool", "serial"])
@pytest.mark.parametrize("case", list(CASES))
def test_elementwise_layout_matches_interpreter(case: str, threads: bool) -> None:
    graph = _graph(case)
    rng = np.random.default_rng(0)
    feeds = {
        s.name: rng.uniform(-4.0, 4.0, s.shape).astype(np.float32) for s in graph.input_specs()
    }
    flags, features = toolchain.feature_flags(detect_cpu())
    tc = toolchain.find_toolchain()
    options = codegen.options_for(features, threads and tc.openmp)
    got = NativeLibrary.build(schedule(graph), options, flags, tc).run(feeds)["out"]
    want = interpreter.run(graph, feeds)["out"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0.0)
