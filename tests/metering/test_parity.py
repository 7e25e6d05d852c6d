"""Parity between outputs and an oracle."""

from __future__ import annotations

import numpy as np

from luminal.metering.parity import compare


def test_within_and_outside_tolerance() -> None:
    want = {"y": np.array([1.0, 100.0, 0.0], np.float32)}
    ok = compare({"y": want["y"] + np.array([5e-6, 5e-3, 9e-6], np.float32)}, want)
    assert ok.ok and ok.max_abs > 4e-3
    bad = compare({"y": want["y"] + np.array([0, 2e-2, 0], np.float32)}, want)
    assert not bad.ok and bad.outputs[0].mismatched == 1


def test_nan_and_inf_must_match_in_place() -> None:
    want = {"y": np.array([np.nan, np.inf, 1.0])}
    assert compare({"y": np.array([np.nan, np.inf, 1.0])}, want).ok
    assert not compare({"y": np.array([0.0, np.inf, 1.0])}, want).ok
    assert not compare({"y": np.array([np.nan, -np.inf, 1.0])}, want).ok


def test_integers_are_exact_and_shapes_checked() -> None:
    assert not compare({"i": np.array([1, 2])}, {"i": np.array([1, 3])}).ok
    result = compare({"i": np.zeros(3)}, {"i": np.zeros(4)})
    assert not result.ok and "shape" in result.outputs[0].reason
    assert not compare({}, {"i": np.zeros(1)}).ok


def test_relative_error_ignores_values_below_atol() -> None:
    result = compare({"y": np.array([1e-9, 1.0])}, {"y": np.array([1e-12, 1.0])})
    assert result.ok and result.max_rel == 0.0
