"""Which candidates the search times: the top-k by the cost model's rank, plus the input
twins (`Variant.unpad`, `Variant.compact`) of the best-ranked kept ones, so that building
the input in the kernel is measured beside the best tiles and never takes one's place."""

from __future__ import annotations

import dataclasses

from luminal.compiler.schedule.variant import DEFAULT, Variant
from luminal.compiler.search.kernels import INPUT_TWINS, _input_twins

WIDE = Variant(mr=4, nr=64)
TALL = Variant(mr=12, nr=32)
TURNED = Variant(orient=1)


def _twin(v: Variant) -> Variant:
    return dataclasses.replace(v, unpad=True)


def test_twins_of_kept_tiles_are_added_best_ranked_first() -> None:
    variants = (DEFAULT, WIDE, TALL, TURNED, _twin(DEFAULT), _twin(WIDE), _twin(TALL))
    est = [3.0, 2.0, 1.0, 4.0, 3.0, 2.0, 1.0]  # a twin pays the same copy as its base
    keep = [2, 1, 0, 3]  # the top 4: tall, wide, default, turned
    twins = _input_twins(variants, est, keep)
    assert [variants[i] for i in twins] == [_twin(TALL), _twin(WIDE)]
    assert len(twins) == INPUT_TWINS


def test_no_twin_for_a_tile_not_kept_nor_one_already_kept() -> None:
    variants = (DEFAULT, WIDE, TALL, _twin(DEFAULT), _twin(TALL))
    est = [1.0, 2.0, 5.0, 1.0, 5.0]
    keep = [0, 3, 1]  # default and its twin made the top-k on their own; tall did not
    assert _input_twins(variants, est, keep) == []


def test_nothing_added_where_no_variant_unpads() -> None:
    variants = (DEFAULT, WIDE, TALL, TURNED)
    assert _input_twins(variants, [1.0, 2.0, 3.0, 4.0], [0, 1]) == []


def test_a_compacting_twin_rides_along_too() -> None:
    variants = (DEFAULT, WIDE, dataclasses.replace(WIDE, compact=True))
    assert _input_twins(variants, [1.0, 2.0, 2.0], [0, 1]) == [2]
