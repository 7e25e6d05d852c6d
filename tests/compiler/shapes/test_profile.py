"""Parsing --profile, --buckets and --shapes, and choosing the bucket a size runs in."""

from __future__ import annotations

import pytest

from luminal.compiler.shapes.profile import (
    MAX_BUCKETS,
    fit_profile,
    parse_profile,
    parse_shapes,
)
from luminal.errors import UsageError


def test_default_buckets_are_two_apart_from_opt_to_both_ends() -> None:
    p = parse_profile(["batch=1..32:8"])
    assert p is not None
    (dim,) = p.dims
    assert dim.buckets == (1, 2, 4, 8, 16, 32)
    assert p.points()[0] == {"batch": 8}  # the opt point is compiled first
    assert [dim.bucket_for(n) for n in (1, 3, 5, 8, 9, 17, 32)] == [1, 4, 8, 8, 16, 32, 32]


def test_opt_defaults_to_max_and_two_dims_coarsen_to_fit() -> None:
    p = parse_profile(["batch=1..8", "seq=1..128"])
    assert p is not None
    assert [d.opt for d in p.dims] == [8, 128]
    assert len(p.points()) <= MAX_BUCKETS
    assert all(d.buckets[-1] == d.hi and d.opt in d.buckets for d in p.dims)


def test_named_buckets_are_kept() -> None:
    p = parse_profile(["seq=1..128:64"], ["seq=16,64,128"])
    assert p is not None and p.dims[0].buckets == (16, 64, 128)
    assert p.point_for({"seq": 17}) == {"seq": 64}


@pytest.mark.parametrize(
    "specs, buckets, message",
    [
        (["b=0..4"], [], "1 <= min <= opt <= max"),
        (["b=4..2"], [], "1 <= min <= opt <= max"),
        (["b=1..4:8"], [], "1 <= min <= opt <= max"),
        (["b"], [], "expected NAME=MIN..MAX"),
        (["b=1..4", "b=1..8"], [], "names a dim twice"),
        (["b=1..4"], ["c=1,2"], "no --profile"),
        (["b=1..8:4"], ["b=1,2"], "include opt and max"),
        (["b=1..8:4"], ["b=x"], "positive integers"),
        ([], ["b=1"], "needs a --profile"),
    ],
)
def test_bad_profiles_are_one_line_usage_errors(
    specs: list[str], buckets: list[str], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        parse_profile(specs, buckets)


def test_a_size_outside_the_profile_names_the_dim_and_range() -> None:
    p = fit_profile([("batch", 2, 16, 4)])
    with pytest.raises(UsageError, match=r"dim 'batch' = 17 is outside .*batch=2..16:4"):
        p.point_for({"batch": 17})
    with pytest.raises(UsageError, match="= 1 is outside"):
        p.point_for({"batch": 1})


def test_shapes() -> None:
    assert parse_shapes(["x=1x3x224x224", "a=2x3,b=4"]) == {
        "x": (1, 3, 224, 224),
        "a": (2, 3),
        "b": (4,),
    }
    for bad in ("x=", "x=1x0", "=3", "x=1xq"):
        with pytest.raises(UsageError, match="--shapes"):
            parse_shapes([bad])


def test_many_dims_coarsen_down_to_min_opt_and_max() -> None:
    p = fit_profile([("a", 1, 8, 2), ("b", 1, 8, 4), ("c", 1, 64, 8)])
    assert [d.buckets for d in p.dims] == [(1, 2, 8), (1, 4, 8), (1, 8, 64)]
