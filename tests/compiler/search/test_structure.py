"""Kernel structure hashes: equal for identical layers, different for different shapes."""

from __future__ import annotations

from luminal.compiler.schedule import schedule
from luminal.compiler.search.structure import kernel_hash, unique
from tests.compiler.search.search_graphs import mlp_block


def test_identical_layers_share_hashes_and_weights_do_not_matter() -> None:
    sched = schedule(mlp_block(layers=4))
    contractions = [k for k in sched.kernels if k.kind == "contraction"]
    assert len(contractions) == 4
    # The first reads the input and the last writes the output; the middle two read and
    # write intermediates and differ only in their weights: one structure.
    hashes = [kernel_hash(sched, k) for k in contractions]
    assert hashes[1] == hashes[2]
    assert len({hashes[0], hashes[1], hashes[3]}) == 3
    other = schedule(mlp_block(layers=4, seed=7))  # new weights, same architecture
    assert [kernel_hash(other, k) for k in other.kernels] == [
        kernel_hash(sched, k) for k in sched.kernels
    ]


def test_shapes_change_the_hash() -> None:
    a = schedule(mlp_block(width=48))
    b = schedule(mlp_block(width=64))
    assert {kernel_hash(a, k) for k in a.kernels}.isdisjoint(kernel_hash(b, k) for k in b.kernels)


def test_unique_groups_every_kernel_once() -> None:
    sched = schedule(mlp_block(layers=4))
    groups = unique(sched, sched.kernels)
    assert sum(len(v) for v in groups.values()) == len(sched.kernels)
    assert len(groups) < len(sched.kernels)
