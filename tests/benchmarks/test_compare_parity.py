"""benchmarks.compare's parity: luminal passes against ONNX Runtime by the bench's rule, or
when it is no farther from ORT than PyTorch eager is (the references' own spread)."""

from __future__ import annotations

import numpy as np

from benchmarks.compare import _parity_cell, _spreads
from luminal.references.parity import compare

REF = {"y": np.array([0.05, 1.0, -0.02], np.float32)}  # bounds 1.5e-5, 1.1e-4, 1.2e-5


def row(got: np.ndarray, eager: np.ndarray) -> dict[str, object]:
    eager_out = {"y": eager}
    return {
        "parity_luminal": compare({"y": got}, REF, spreads=_spreads(eager_out, REF)).to_json(),
        "parity_luminal_strict": compare({"y": got}, REF).to_json(),
        "parity_torch": compare(eager_out, REF).to_json(),
    }


def test_within_the_rule_is_ok() -> None:
    assert _parity_cell(row(REF["y"] + 1e-6, REF["y"] + 4e-5)) == "OK (1e-06)"


def test_within_torchs_own_distance_is_ok_and_says_so() -> None:
    cell = _parity_cell(row(REF["y"] + 3e-5, REF["y"] + 4e-5))
    assert cell.startswith("OK (3e-05; torch 4e-05)"), cell


def test_farther_than_torch_is_a_mismatch() -> None:
    assert _parity_cell(row(REF["y"] + 2e-4, REF["y"] + 4e-5)).startswith("MISMATCH")


def test_no_spread_from_an_output_torch_does_not_give() -> None:
    assert _spreads({"z": np.zeros(3)}, REF) == {}
    assert _spreads({"y": np.zeros(2)}, REF) == {}  # another shape


def test_a_torch_run_far_from_ort_widens_nothing() -> None:
    """torch 0.1 away (a broken reference, say dropout left on) fails the kernel check
    itself: luminal is held to the strict rule."""
    assert _spreads({"y": REF["y"] + 0.1}, REF) == {}
    assert _parity_cell(row(REF["y"] + 3e-5, REF["y"] + 0.1)).startswith("MISMATCH")
