"""`random_inputs`, the one generator of made-up inputs (run, bench, search, tests)."""

from __future__ import annotations

import numpy as np

from luminal.compiler.inputs import random_inputs
from luminal.compiler.ir import DType, GraphBuilder, TensorSpec, interpreter

SPECS = [
    TensorSpec("x", (64, 32), DType.F32),
    TensorSpec("ids", (4, 256), DType.I64),
    TensorSpec("pos", (300,), DType.I32),
    TensorSpec("mask", (500,), DType.BOOL),
    TensorSpec("h", (16,), DType.F16),
]


def test_integers_are_zero_or_one_and_both_occur() -> None:
    feeds = random_inputs(SPECS, seed=0)
    for name in ("ids", "pos"):
        assert set(np.unique(feeds[name]).tolist()) == {0, 1}, name
    assert set(np.unique(feeds["mask"]).tolist()) == {False, True}
    x = feeds["x"].astype(np.float64)
    assert abs(x.mean()) < 0.1 and 0.9 < x.std() < 1.1  # N(0, 1)


def test_shapes_dtypes_and_seeds() -> None:
    feeds = random_inputs(SPECS, seed=4)
    assert [(n, a.shape, a.dtype) for n, a in feeds.items()] == [
        (s.name, s.shape, s.dtype.np) for s in SPECS
    ]
    again, other = random_inputs(SPECS, seed=4), random_inputs(SPECS, seed=5)
    assert all(np.array_equal(feeds[n], again[n]) for n in feeds)
    assert not np.array_equal(feeds["x"], other["x"])


def test_made_up_indices_are_valid_for_a_gather_along_a_dim_of_two() -> None:
    b = GraphBuilder()
    table = b.const(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    ids = b.input("ids", (3, 5), DType.I64)
    graph = b.build({"y": b.gather(table, ids, 0)})
    feeds = random_inputs(graph.input_specs(), seed=1)
    got = interpreter.run(graph, feeds)["y"]
    want = np.take(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), feeds["ids"], axis=0)
    np.testing.assert_array_equal(got, want)
