"""A reduction over adjacent axes that every read steps through as one runs as one loop
(`codegen._merged_reduction`): a global average pool over 7x7 is one vector loop of 49,
not 7 loops of 7 lanes.  Reads that do not step as one (a permuted input) keep a loop per
axis, so no division enters the loop.  Both against the reference interpreter."""

from __future__ import annotations

import re

import numpy as np
import pytest

from luminal.compiler.backends.cpu import codegen
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import DType, Graph, GraphBuilder, Op
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import schedule
from tests.helpers.compiled import compile_and_run


def pooled(permute: bool, axes: tuple[int, ...] = (2, 3)) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (2, 24, 7, 5), DType.F32)
    if permute:  # (n, c, w, h): the pool's reads step by 5 along h, by 1 along w
        x = b.permute(x, (0, 1, 3, 2))
    silu = m.mul(b, x, m.sigmoid(b, x))
    return b.build({"y": b.reduce(Op.SUM, silu, axes)})


def reduction_loops(graph: Graph) -> list[str]:
    source = codegen.generate(schedule(graph), codegen.CodegenOptions())
    return re.findall(r"for \(int64_t (r[\w]*) = 0; \1 < (\d+);", source)


@pytest.mark.parametrize(
    ("permute", "axes", "loops"),
    [
        (False, (2, 3), [("r2_3", "35")]),  # one loop over the 7x5 window
        (False, (1, 2, 3), [("r1_2_3", "840")]),  # a whole-sample sum
        (True, (2, 3), [("r2", "5"), ("r3", "7")]),  # strided reads: a loop per axis
        (False, (1, 3), [("r1", "24"), ("r3", "5")]),  # not adjacent
    ],
)
def test_adjacent_reduced_axes_merge_only_when_reads_step_as_one(
    permute: bool, axes: tuple[int, ...], loops: list[tuple[str, str]], tmp_path
) -> None:  # type: ignore[no-untyped-def]
    graph = pooled(permute, axes)
    assert reduction_loops(graph) == loops
    feed = np.random.default_rng(3).standard_normal((2, 24, 7, 5)).astype(np.float32)
    got = compile_and_run(graph, {"x": feed}, tmp_path)["y"]
    want = reference.run(graph, {"x": feed})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
