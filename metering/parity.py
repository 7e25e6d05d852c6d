"""Output parity: does a result agree with an oracle within tolerance?

An element passes when |got - want| <= atol + rtol * |want| (numpy.allclose's rule);
NaNs must sit in the same places.  Integer and bool outputs must match exactly.
The reported maximum relative error ignores elements whose |want| is below atol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-5


@dataclass(frozen=True)
class OutputParity:
    name: str
    max_abs: float
    max_rel: float
    mismatched: int
    total: int
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class Parity:
    outputs: tuple[OutputParity, ...]
    rtol: float
    atol: float

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((o.max_rel for o in self.outputs), default=0.0)

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "rtol": self.rtol,
            "atol": self.atol,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "outputs": [o.__dict__ for o in self.outputs],
        }


def compare(
    got: Mapping[str, np.ndarray],
    want: Mapping[str, np.ndarray],
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
) -> Parity:
    results = []
    for name, ref in want.items():
        if name not in got:
            results.append(OutputParity(name, np.inf, np.inf, ref.size, ref.size, False, "missing"))
            continue
        results.append(_compare_one(name, np.asarray(got[name]), np.asarray(ref), rtol, atol))
    return Parity(tuple(results), rtol, atol)


def _compare_one(
    name: str, got: np.ndarray, ref: np.ndarray, rtol: float, atol: float
) -> OutputParity:
    if got.shape != ref.shape:
        return OutputParity(
            name, np.inf, np.inf, ref.size, ref.size, False, f"shape {got.shape} != {ref.shape}"
        )
    exact = ref.dtype.kind in "biu"
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - r)
        same_special = (np.isnan(g) & np.isnan(r)) | ((g == r) & np.isinf(r))
        bound = 0 if exact else np.where(np.isfinite(r), atol + rtol * np.abs(r), 0.0)
        bad = ~((diff <= bound) | same_special)
        finite = np.isfinite(diff)
        max_abs = float(diff[finite].max()) if finite.any() else 0.0
        # Relative error is reported where it means something: |want| above atol.
        meaningful = finite & (np.abs(r) > atol)
        rel = diff / np.maximum(np.abs(r), np.finfo(np.float64).tiny)
        max_rel = float(rel[meaningful].max()) if meaningful.any() else 0.0
    mismatched = int(bad.sum())
    return OutputParity(name, max_abs, max_rel, mismatched, int(ref.size), mismatched == 0)
