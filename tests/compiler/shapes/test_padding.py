"""pad_graph on IR graphs: the masked graph at a bucket size, run on zero-padded inputs and
cut back, equals the graph built at the smaller size (the reference interpreter is the
oracle); what would mix padded positions in is refused, naming the node."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from luminal.compiler.frontend.compose import contraction
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import DType, Graph, GraphBuilder, Op, Value
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.ir.spec import check
from luminal.compiler.shapes.padding import pad_feeds, pad_graph, unpad
from luminal.errors import UnsupportedOp

Build = Callable[[GraphBuilder, Value], dict[str, Value]]


def _graph(build: Build, shape: tuple[int, ...]) -> Graph:
    b = GraphBuilder()
    x = b.input("x", shape, DType.F32)
    with b.origin(("the_node",)):
        outs = build(b, x)
    return b.build(outs)


def _softmax(b: GraphBuilder, x: Value, axis: int) -> Value:
    mx = b.expand(b.reduce(Op.RMAX, x, [axis]), x.shape)
    e = b.unary(Op.EXP2, b.binary(Op.ADD, x, m.neg(b, mx)))
    return b.binary(Op.MUL, e, b.expand(b.unary(Op.RECIP, b.reduce(Op.SUM, e, [axis])), x.shape))


def attention(b: GraphBuilder, x: Value) -> dict[str, Value]:
    """(batch, seq, 4): self-attention with x as q, k and v, then a mean over seq."""
    kt = b.permute(x, (0, 2, 1))
    p = _softmax(b, contraction.matmul(b, x, kt), 2)
    out = contraction.matmul(b, p, x)
    return {"out": out, "pooled": m.reduce_mean(b, out, [1], keepdims=False)}


def merged(b: GraphBuilder, x: Value) -> dict[str, Value]:
    """(batch, seq, 4) -> (batch*seq, 4) rows, a max over rows, and back."""
    batch, seq, h = x.shape
    rows = b.reshape(x, (batch * seq, h))
    top = b.reduce(Op.RMAX, rows, [0])
    return {"rows": b.binary(Op.ADD, rows, b.expand(top, rows.shape)), "top": top}


@pytest.mark.parametrize("build", [attention, merged])
@pytest.mark.parametrize("sizes", [(1, 1), (2, 3), (3, 5), (3, 8)])
def test_padded_equals_exact(build: Build, sizes: tuple[int, int]) -> None:
    bucket = {"batch": 3, "seq": 8}
    n = dict(zip(("batch", "seq"), sizes, strict=True))
    padded = pad_graph(_graph(build, (3, 8, 4)), {"x": {0: "batch", 1: "seq"}})
    check(padded.graph)
    assert padded.masks >= 1
    exact = _graph(build, (*sizes, 4))
    x = np.random.default_rng(0).standard_normal((*sizes, 4)).astype(np.float32)
    want = reference.run(exact, {"x": x})
    feeds = pad_feeds({"x": x}, {"x": {0: "batch", 1: "seq"}}, bucket, padded.dims, n)
    got = reference.run(padded.graph, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(unpad(got[name], padded.outputs[name], n), value, atol=1e-5)


def test_a_dim_compiled_at_size_one_is_not_padded() -> None:
    padded = pad_graph(_graph(attention, (1, 8, 4)), {"x": {0: "batch", 1: "seq"}})
    assert padded.dims == ("seq",)


@pytest.mark.parametrize(
    "build, what",
    [
        (lambda b, x: {"y": b.slice(x, [(0, 1, 2), (7, 1, 1), (0, 1, 4)])}, "slices axis 1"),
        (lambda b, x: {"y": b.pad(x, [(0, 0), (1, 1), (0, 0)])}, "pads axis 1"),
        (
            lambda b, x: {"y": b.reshape(x, (2, 2, 4, 4))},
            r"reshapes \(2, 8, 4\) to \(2, 2, 4, 4\), splitting dim 'seq'",
        ),
        (
            lambda b, x: {"y": b.gather(x, b.const(np.array([7], dtype=np.int64)), 1)},
            "gathers along an axis that holds dim 'seq'",
        ),
    ],
)
def test_mixing_padded_positions_in_is_refused_naming_the_node(build: Build, what: str) -> None:
    with pytest.raises(UnsupportedOp, match=f"node 'the_node' {what}"):
        pad_graph(_graph(build, (2, 8, 4)), {"x": {1: "seq"}})


def test_unknown_input_is_refused() -> None:
    with pytest.raises(UnsupportedOp, match="input 'y'"):
        pad_graph(_graph(attention, (2, 8, 4)), {"y": {0: "batch"}})
