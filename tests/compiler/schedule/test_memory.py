"""The static arena plan (`schedule/memory.py`): no two live buffers share a byte, memory
is reused once a lifetime ends, every offset is aligned.  Checked on hand-made lifetimes,
on random ones, and on a real schedule whose compiled run must still match the reference
interpreter (a bad overlap would corrupt a value the next layer reads)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from luminal.compiler.ir import DType, Graph, Op, interpreter, numel
from luminal.compiler.ir.builder import GraphBuilder, Value
from luminal.compiler.schedule import Schedule, memory, schedule
from luminal.compiler.schedule.memory import ALIGN, Lifetime, plan
from tests.helpers.compiled import compile_and_run


def chains(lifetimes: list[Lifetime]) -> dict[int, int]:
    """buffer -> the first buffer of the in-place chain it belongs to."""
    root: dict[int, int] = {}
    for lt in sorted(lifetimes, key=lambda lt: lt.start):
        root[lt.buffer] = root[lt.reuse] if lt.reuse is not None else lt.buffer
    return root


def assert_sound(lifetimes: list[Lifetime], offsets: dict[int, int], arena: int) -> None:
    """Every buffer aligned and inside the arena; any two buffers alive at once (and not
    one in-place chain) at disjoint bytes; an in-place write at its input's offset."""
    assert set(offsets) == {lt.buffer for lt in lifetimes}
    root = chains(lifetimes)
    for lt in lifetimes:
        assert offsets[lt.buffer] % ALIGN == 0, lt
        assert 0 <= offsets[lt.buffer] and offsets[lt.buffer] + lt.nbytes <= arena, lt
        if lt.reuse is not None:
            assert offsets[lt.buffer] == offsets[lt.reuse], lt
    for a in lifetimes:
        for b in lifetimes:
            if a.buffer >= b.buffer or root[a.buffer] == root[b.buffer]:
                continue
            if a.start <= b.end and b.start <= a.end:  # alive at the same kernel
                oa, ob = offsets[a.buffer], offsets[b.buffer]
                assert oa + a.nbytes <= ob or ob + b.nbytes <= oa, (a, oa, b, ob)


def test_no_buffers_no_arena() -> None:
    assert plan([]) == ({}, 0)


def test_a_buffer_whose_lifetime_ended_lends_its_memory_to_a_later_one() -> None:
    # a is read last by kernel 1, c is written by kernel 2: c takes a's place.
    lts = [Lifetime(1, 1000, 0, 1), Lifetime(2, 1000, 1, 2), Lifetime(3, 1000, 2, 3)]
    offsets, arena = plan(lts)
    assert_sound(lts, offsets, arena)
    assert offsets[3] == offsets[1] != offsets[2]
    assert arena == 2 * memory.align(1000)


def test_buffers_alive_together_get_disjoint_aligned_slots() -> None:
    lts = [Lifetime(1, 1, 0, 2), Lifetime(2, 100, 0, 2), Lifetime(3, 1, 1, 2)]
    offsets, arena = plan(lts)
    assert_sound(lts, offsets, arena)
    assert sorted(offsets.values()) == [0, 128, 192]  # largest first; 1 byte takes 64
    assert arena == 256


def test_an_in_place_chain_shares_one_slot_for_its_whole_span() -> None:
    # 1 -> 2 -> 3 written in place over each other; 4 lives across the chain's span.
    lts = [
        Lifetime(1, 256, 0, 1),
        Lifetime(2, 256, 1, 2, reuse=1),
        Lifetime(3, 256, 2, 4, reuse=2),
        Lifetime(4, 256, 0, 3),
    ]
    offsets, arena = plan(lts)
    assert_sound(lts, offsets, arena)
    assert offsets[1] == offsets[2] == offsets[3] != offsets[4]
    assert arena == 512


@pytest.mark.parametrize("seed", range(20))
def test_random_lifetimes_never_overlap_and_pack_within_bounds(seed: int) -> None:
    rng = random.Random(seed)
    lts: list[Lifetime] = []
    for n in range(rng.randint(1, 30)):
        start = rng.randint(0, 15)
        end = start + rng.choice([0, 0, 1, 2, rng.randint(0, 10)])
        nbytes = rng.choice([1, 4, 63, 64, 65, 1000, rng.randint(1, 5000)])
        # in place, as the scheduler allows it: over a buffer of the same size whose
        # last read is this write, and that nobody else writes over already
        taken = {lt.reuse for lt in lts}
        dying = [
            lt
            for lt in lts
            if lt.start < start == lt.end and lt.nbytes == nbytes and lt.buffer not in taken
        ]
        reuse = dying[0].buffer if dying and rng.random() < 0.7 else None
        lts.append(Lifetime(100 + n, nbytes, start, end, reuse))
    offsets, arena = plan(lts)
    assert_sound(lts, offsets, arena)
    # never more than every slot side by side, never less than what is alive at the
    # busiest kernel (an in-place chain, whose members have one size, counted once)
    root = chains(lts)
    slots = {root[lt.buffer]: 0 for lt in lts}
    for lt in lts:
        slots[root[lt.buffer]] = max(slots[root[lt.buffer]], memory.align(lt.nbytes))
    assert arena <= sum(slots.values())
    for t in range(27):
        alive = {root[lt.buffer]: memory.align(lt.nbytes) for lt in lts if lt.start <= t <= lt.end}
        assert arena >= sum(alive.values())


# ---- the plan inside a real schedule ------------------------------------------------------


def dense(b: GraphBuilder, x: Value, rng: np.random.Generator, n: int) -> Value:
    """relu(x @ w): a contraction whose relu epilogue writes the layer's buffer."""
    m, k = x.shape
    w = b.const((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32))
    xe = b.expand(b.reshape(x, (m, k, 1)), (m, k, n))
    we = b.expand(b.reshape(w, (1, k, n)), (m, k, n))
    y = b.reshape(b.reduce(Op.SUM, b.binary(Op.MUL, xe, we), [1]), (m, n))
    zero = b.expand(b.reshape(b.const(np.float32(0)), (1, 1)), (m, n))
    return b.binary(Op.MAX, y, zero)


def deep_mlp(layers: int) -> Graph:
    b = GraphBuilder()
    rng = np.random.default_rng(0)
    h = b.input("x", (4, 24), DType.F32)
    for _ in range(layers):
        h = dense(b, h, rng, 24)
    return b.build({"y": h})


def arena_lifetimes(s: Schedule) -> list[Lifetime]:
    """Each arena buffer from the kernel writing it to the last kernel reading it, as the
    schedule's kernels say (not as the scheduler computed them)."""
    out = []
    for n, k in enumerate(s.kernels):
        if k.dest.kind != "arena":
            continue
        node = s.graph.nodes[k.node]
        end = max([m for m, r in enumerate(s.kernels) if k.node in r.reads], default=n)
        out.append(Lifetime(k.node, numel(node.shape) * node.dtype.itemsize, n, end, k.inplace))
    return out


def test_a_schedule_places_live_buffers_apart_and_reuses_dead_ones(tmp_path: Path) -> None:
    graph = deep_mlp(5)
    s = schedule(graph)
    lts = arena_lifetimes(s)
    assert len(lts) == 4  # the four hidden layers; the fifth writes the output
    offsets = {k.node: k.dest.index for k in s.kernels if k.dest.kind == "arena"}
    assert_sound(lts, offsets, s.arena_bytes)
    # layer i is dead once layer i+1 is computed: two slots serve all four
    assert len(set(offsets.values())) == 2
    assert s.arena_bytes == 2 * memory.align(4 * 24 * 4) < s.intermediate_bytes
    feeds = {"x": np.random.default_rng(1).standard_normal((4, 24)).astype(np.float32)}
    got = compile_and_run(graph, feeds, tmp_path)
    np.testing.assert_allclose(got["y"], interpreter.run(graph, feeds)["y"], rtol=1e-5, atol=1e-6)
