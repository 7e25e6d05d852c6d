"""Parity: the one tolerance rule, its per-dtype defaults, and the search's kernel check."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from luminal.references.parity import (
    EXACT,
    Check,
    Tolerance,
    agrees,
    compare,
    compare_arrays,
    tolerance_for,
)


def test_within_and_outside_tolerance() -> None:
    want = {"y": np.array([1.0, 100.0, 0.0], np.float32)}
    ok = compare({"y": want["y"] + np.array([5e-6, 5e-3, 9e-6], np.float32)}, want)
    assert ok.ok and ok.max_abs > 4e-3
    assert (ok.rtol, ok.atol) == (1e-4, 1e-5)  # f32's default
    bad = compare({"y": want["y"] + np.array([0, 2e-2, 0], np.float32)}, want)
    assert not bad.ok and bad.outputs[0].mismatched == 1


def test_nan_and_inf_must_match_in_place() -> None:
    want = {"y": np.array([np.nan, np.inf, 1.0], np.float32)}
    assert compare({"y": np.array([np.nan, np.inf, 1.0], np.float32)}, want).ok
    assert not compare({"y": np.array([0.0, np.inf, 1.0], np.float32)}, want).ok
    assert not compare({"y": np.array([np.nan, -np.inf, 1.0], np.float32)}, want).ok
    misplaced = compare({"y": np.array([np.nan, np.inf, np.nan], np.float32)}, want)
    assert not misplaced.ok and misplaced.max_abs == np.inf  # the difference is unbounded


def test_integers_are_exact_and_shapes_checked() -> None:
    assert not compare({"i": np.array([1, 2])}, {"i": np.array([1, 3])}).ok
    # Exact as integers: float64 would round 2**53 + 1 to 2**53.
    big = np.array([2**53 + 1], np.int64)
    assert not compare({"i": big}, {"i": big - 1}, Tolerance(1.0, 1.0)).ok
    result = compare({"i": np.zeros(3)}, {"i": np.zeros(4)})
    assert not result.ok and "shape" in result.outputs[0].reason
    missing = compare({}, {"i": np.zeros(1)})
    assert not missing.ok and missing.outputs[0].reason == "missing"


def test_relative_error_ignores_values_below_atol() -> None:
    result = compare(
        {"y": np.array([1e-9, 1.0])}, {"y": np.array([1e-12, 1.0])}, Tolerance(1e-4, 1e-5)
    )
    assert result.ok and result.max_rel == 0.0


def test_defaults_per_dtype_and_check() -> None:
    assert tolerance_for(np.float32) == Tolerance(1e-4, 1e-5)
    assert tolerance_for("float32", Check.KERNEL) == Tolerance(1e-3, 1e-4, 1e-5)
    assert tolerance_for("f16") == Tolerance(1e-2, 1e-3)
    assert tolerance_for(np.dtype(ml_dtypes.bfloat16)) == Tolerance(2e-2, 1e-2)
    assert tolerance_for(np.float64) == Tolerance(1e-7, 1e-10)
    for exact in (np.int64, np.uint8, np.bool_):
        assert tolerance_for(exact) == EXACT and tolerance_for(exact, Check.KERNEL) == EXACT
    # bf16 is only stored, moved and cast on the CPU: its kernels are bit-exact or wrong.
    assert tolerance_for("bf16", Check.KERNEL) == EXACT


def test_compare_takes_defaults_one_tolerance_or_a_table() -> None:
    want = {"a": np.array([1.0], np.float64), "b": np.array([1.0], np.float16)}
    got = {"a": np.array([1.0 + 1e-5]), "b": np.array([1.005], np.float16)}
    by_default = compare(got, want)  # f64 is held to 1e-7, f16 to 1e-2
    assert [o.ok for o in by_default.outputs] == [False, True]
    assert by_default.rtol == 1e-2 and by_default.atol == 1e-3  # the loosest applied
    assert compare(got, want, Tolerance(1e-3, 0.0)).outputs[0].ok
    assert not compare(got, want, Tolerance(1e-3, 0.0)).outputs[1].ok
    table = compare(got, want, {"f64": Tolerance(1e-4, 0.0)})
    assert [o.ok for o in table.outputs] == [True, True]
    assert table.outputs[1].tolerance == tolerance_for("f16")  # not in the table: default


def test_the_scale_clause_passes_a_whole_array_a_per_element_bound_fails() -> None:
    want = np.array([1000.0, 0.0], np.float32)  # 0.0: large terms that cancelled
    got = np.array([1000.0, 0.005], np.float32)
    one = compare_arrays("y", got, want, Tolerance(1e-3, 1e-4, 1e-5))
    assert one.ok and one.mismatched == 1  # 0.005 <= 1e-5 * 1000
    assert not compare_arrays("y", got, want, Tolerance(1e-3, 1e-4)).ok
    assert not compare_arrays("y", got * 2, want, Tolerance(1e-3, 1e-4, 1e-5)).ok


def test_to_json_is_plain_data() -> None:
    parity = compare({"y": np.ones(2, np.float32)}, {"y": np.ones(2, np.float32)})
    data = parity.to_json()
    assert data["ok"] is True and data["rtol"] == 1e-4
    assert data["outputs"] == [
        {
            "name": "y",
            "rtol": 1e-4,
            "atol": 1e-5,
            "scale": 0.0,
            "max_abs": 0.0,
            "max_rel": 0.0,
            "mismatched": 0,
            "total": 2,
            "ok": True,
            "reason": "",
        }
    ]


# ---- the kernel check against what the search used before (`matches`) ------------------


def matches(got: np.ndarray, want: np.ndarray | None) -> tuple[bool, float]:
    """The search's kernel check as it was (`compiler/search/measure.matches`, then
    `compiler/backends/cpu/bench.matches`), copied here as the oracle of `agrees`."""
    if want is None:
        return True, 0.0
    want = np.asarray(want).reshape(got.shape)
    if not np.issubdtype(got.dtype, np.floating):
        return bool(np.array_equal(got, want)), 0.0
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(w)
    if not np.array_equal(np.isfinite(g), finite):
        return False, float("inf")
    diff = np.abs(g[finite] - w[finite])
    err = float(diff.max()) if diff.size else 0.0
    scale = float(np.abs(w[finite]).max()) if diff.size else 0.0
    return bool(
        np.all(diff <= 1e-4 + 1e-3 * np.abs(w[finite])) or err <= 1e-5 * max(scale, 1.0)
    ), err


def _f(*values: float, dtype: type = np.float32) -> np.ndarray:
    return np.array(values, dtype)


_R = np.random.default_rng(0)
_BASE = _R.standard_normal(64).astype(np.float32)

#: (id, got, want): the edge cases of the kernel check.
EDGE_CASES = [
    ("equal", _BASE, _BASE),
    ("within-rel", _BASE * np.float32(1 + 5e-4), _BASE),
    ("outside-rel", _BASE * np.float32(1 + 5e-3), _BASE),
    ("within-abs-at-zero", _f(0.0, 1.0) + _f(9e-5, 0.0), _f(0.0, 1.0)),
    ("outside-abs-at-zero", _f(2e-4, 1.0), _f(0.0, 1.0)),
    ("nan-in-place", _f(np.nan, 1.0, 2.0), _f(np.nan, 1.0, 2.0)),
    ("nan-misplaced", _f(1.0, np.nan, 2.0), _f(np.nan, 1.0, 2.0)),
    ("nan-where-finite", _f(np.nan, 1.0), _f(0.0, 1.0)),
    ("finite-where-nan", _f(0.0, 1.0), _f(np.nan, 1.0)),
    ("inf-in-place", _f(np.inf, -np.inf, 3.0), _f(np.inf, -np.inf, 3.0)),
    ("inf-where-finite", _f(np.inf, 3.0), _f(1e30, 3.0)),
    ("finite-where-inf", _f(3e38, 3.0), _f(np.inf, 3.0)),
    ("all-nonfinite", _f(np.nan, np.inf), _f(np.nan, np.inf)),
    ("empty", _f(), _f()),
    ("large-within-rel", _f(1e30, -2e30) * np.float32(1 + 9e-4), _f(1e30, -2e30)),
    ("large-outside-rel", _f(1e30, -2e30) * np.float32(1 + 2e-3), _f(1e30, -2e30)),
    ("scale-clause-passes", _f(1e6, 0.0, 5.0) + _f(0, 9.0, 0), _f(1e6, 0.0, 5.0)),
    ("scale-clause-fails", _f(1e6, 0.0, 5.0) + _f(0, 11.0, 0), _f(1e6, 0.0, 5.0)),
    ("scale-clause-at-one", _f(1e-3, 0.0) + _f(0, 1.1e-4), _f(1e-3, 0.0)),
    ("scale-below-one", _f(0.5, 0.0) + _f(0, 9e-6), _f(0.5, 0.0)),
    ("f64", _BASE.astype(np.float64) + 2e-4, _BASE.astype(np.float64)),
    ("f16", _f(1.0, 2.0, dtype=np.float16) + np.float16(1e-3), _f(1.0, 2.0, dtype=np.float16)),
    ("reshaped-want", _BASE.reshape(8, 8), _BASE),
    ("int-equal", np.arange(6, dtype=np.int64), np.arange(6, dtype=np.int64)),
    ("int-off-by-one", np.arange(6, dtype=np.int64) + (np.arange(6) == 3), np.arange(6)),
    ("int-large", np.array([2**62 + 1], np.int64), np.array([2**62 + 1], np.int64)),
    ("int32-negative", np.array([-5, 7], np.int32), np.array([-5, 7], np.int32)),
    ("bool-equal", np.array([True, False]), np.array([True, False])),
    ("bool-differs", np.array([True, True]), np.array([True, False])),
    ("no-reference", _BASE, None),
]


@pytest.mark.parametrize(
    ("got", "want"), [c[1:] for c in EDGE_CASES], ids=[c[0] for c in EDGE_CASES]
)
def test_agrees_gives_the_verdicts_of_the_search_s_old_check(got, want) -> None:  # type: ignore[no-untyped-def]
    ok, err = agrees(got, want)
    want_ok, want_err = matches(got, want)
    assert ok == want_ok
    if np.issubdtype(got.dtype, np.floating):  # the old check reported 0.0 for integers
        assert err == want_err


def test_the_edge_cases_cover_both_verdicts() -> None:
    verdicts = {matches(got, want)[0] for _, got, want in EDGE_CASES}
    assert verdicts == {True, False}


def test_agrees_is_stricter_only_on_a_non_finite_value_of_the_wrong_kind() -> None:
    """The old check compared only where values were finite, so a kernel returning -inf
    (or NaN) where the reference has +inf passed it; the one rule rejects that."""
    for got, want in [(_f(-np.inf, 1.0), _f(np.inf, 1.0)), (_f(np.nan, 1.0), _f(np.inf, 1.0))]:
        assert matches(got, want) == (True, 0.0)
        assert agrees(got, want) == (False, float("inf"))


def test_agrees_reports_the_integer_difference() -> None:
    assert agrees(np.array([1, 5]), np.array([1, 2])) == (False, 3.0)
