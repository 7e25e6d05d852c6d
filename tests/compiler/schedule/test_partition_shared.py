"""A computed chain read by several kernels is materialized at its end only."""

from __future__ import annotations

import numpy as np

from luminal.compiler.ir import DType, GraphBuilder, Op, interpreter
from luminal.compiler.schedule.partition import partition


def test_a_shared_chain_is_materialized_once_at_its_end() -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 8), DType.F32)
    chain = x
    for _ in range(6):  # six elementwise steps, each reading the one before twice
        chain = b.binary(Op.ADD, b.binary(Op.MUL, chain, chain), chain)
    total = b.reduce(Op.SUM, chain, [1])  # two kernels read the chain's end
    top = b.reduce(Op.RMAX, chain, [1])
    graph = b.build({"total": total, "top": top})
    mat = partition(graph).materialized
    computed = [i for i in mat if graph.nodes[i].op not in (Op.INPUT, Op.CONST, Op.SUM, Op.RMAX)]
    assert computed == [chain.id], [graph.nodes[i].op for i in computed]
    feeds = {"x": np.random.default_rng(0).uniform(-0.5, 0.5, (4, 8)).astype(np.float32)}
    out = interpreter.run(graph, feeds)
    assert out["total"].shape == out["top"].shape == (4, 1)


def test_an_epilogue_reading_its_input_many_times_schedules_at_once() -> None:
    """A requantize-like epilogue (every step reads the one before twice) after a
    reduction: the epilogue-fusion walk visits each (value, index) once, not each path
    (2**12 of them here)."""
    import time

    from luminal.compiler.schedule import schedule

    b = GraphBuilder()
    x = b.input("x", (4, 8), DType.F32)
    y = b.reduce(Op.SUM, x, [1])
    for _ in range(12):
        y = b.binary(Op.ADD, b.binary(Op.MUL, y, y), y)
    graph = b.build({"y": y})
    t0 = time.perf_counter()
    sched = schedule(graph)
    assert time.perf_counter() - t0 < 1.0
    assert [k.kind for k in sched.kernels] == ["reduce"]  # the epilogue fused into it
