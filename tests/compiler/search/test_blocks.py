"""Repeated blocks are found by structure (weights abstracted), searched once, and
instantiated per occurrence with that occurrence's weights."""

from __future__ import annotations

import numpy as np

from luminal.compiler.frontend.compose import contraction as cc
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import norm
from luminal.compiler.ir import interpreter, spec
from luminal.compiler.ir.builder import GraphBuilder, Value
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph
from luminal.compiler.ir.ops import Op
from luminal.compiler.schedule import schedule
from luminal.compiler.search.blocks import find_blocks
from luminal.compiler.search.saturate import rewrite

RNG = np.random.default_rng(0)


def layer(b: GraphBuilder, x: Value, width: int) -> Value:
    """Pre-norm residual MLP block with a scaled activation."""
    w1 = b.const((RNG.standard_normal((x.shape[1], width)) / 4).astype(np.float32))
    w2 = b.const((RNG.standard_normal((width, x.shape[1])) / 4).astype(np.float32))
    h = norm.layer_norm(b, x, None, None, [1], 1e-5)
    h = m.relu(b, cc.matmul(b, h, w1))
    h = cc.matmul(b, b.binary(Op.MUL, h, m.like(b, 0.5, h)), w2)
    return m.add(b, x, h)


def tower(widths: list[int]) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (4, 16), DType.F32)
    for width in widths:
        x = layer(b, x, width)
    return b.build({"y": m.relu(b, x)})


def assert_same(before: Graph, after: Graph) -> None:
    feeds = {"x": np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)}
    want, got = interpreter.run(before, feeds)["y"], interpreter.run(after, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(want).max()))


def test_identical_layers_are_one_block() -> None:
    graph = tower([32, 32, 32, 32])
    (block,) = find_blocks(graph)
    assert len(block.instances) >= 3
    first = block.instances[0]
    for before, inst in zip(block.instances, block.instances[1:], strict=False):
        assert inst.entry == before.exit  # the layers follow each other
        assert len(inst.nodes) == len(first.nodes)
        assert [graph.nodes[p].shape for p in inst.params] == [
            graph.nodes[p].shape for p in first.params
        ]
    template = block.template(graph)
    spec.check(template)
    assert template.inputs[0][0] == "__entry"


def test_different_layers_are_not_a_block() -> None:
    assert find_blocks(tower([8, 16, 32, 64])) == ()


def test_a_block_read_from_outside_is_not_reused() -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 16), DType.F32)
    outs = {}
    for k in range(3):
        x = layer(b, x, 32)
        outs[f"y{k}"] = x  # every layer's output is a graph output
    graph = b.build(outs)
    for block in find_blocks(graph):
        outputs = {i for _, i in graph.outputs}
        for inst in block.instances:
            assert not (set(inst.nodes[:-1]) & outputs)


def test_rewrite_searches_the_block_once_and_applies_it_everywhere() -> None:
    graph = tower([32, 32, 32, 32])
    out, report = rewrite(graph)
    assert report.fallback is None
    assert report.blocks == 1 and report.block_instances >= 3
    assert len(schedule(out).kernels) < len(schedule(graph).kernels)

    # Each occurrence folded the 0.5 into its own second weight (one scaled copy each).
    def second_weights(g: Graph) -> list[np.ndarray]:
        return [g.consts[n.arg] for n in g.nodes if n.op is Op.CONST and n.shape[-2:] == (32, 16)]

    before, after = second_weights(graph), second_weights(out)
    assert len(after) == len(before) == 4
    for w, w2 in zip(before, after, strict=True):
        np.testing.assert_allclose(w2.reshape(w.shape), 0.5 * w, rtol=1e-6)
    assert_same(graph, out)
