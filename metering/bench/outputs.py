"""Output parity of the compiled model against the baseline, with tolerances per dtype.

An element passes when |got - want| <= atol + rtol x |want| (`luminal.metering.parity`);
integer and bool outputs must match exactly, NaNs must sit in the same places.  The
tolerance is chosen by the dtype of the baseline's output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from luminal.errors import UsageError
from luminal.metering.parity import compare

#: (rtol, atol) per dtype; integer and bool outputs are always compared exactly.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "f64": (1e-7, 1e-10),
    "f32": (1e-4, 1e-5),
    "f16": (1e-2, 1e-3),
    "bf16": (2e-2, 1e-2),
}

_NAMES = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def dtype_key(dtype: np.dtype) -> str:
    """`f32`, `f64`, `f16`, `bf16`, or the numpy name for exact dtypes."""
    return _NAMES.get(np.dtype(dtype).name, np.dtype(dtype).name)


def parse_tolerances(pairs: list[str] | None) -> dict[str, tuple[float, float]]:
    """DEFAULT_TOLERANCES updated by `DTYPE=RTOL,ATOL` pairs (e.g. `f32=1e-3,1e-4`)."""
    table = dict(DEFAULT_TOLERANCES)
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        rtol, comma, atol = value.partition(",")
        try:
            if not sep or not comma or name not in DEFAULT_TOLERANCES:
                raise ValueError
            table[name] = (float(rtol), float(atol))
        except ValueError:
            raise UsageError(
                f"--tol '{pair}': expected DTYPE=RTOL,ATOL with DTYPE one of "
                f"{', '.join(DEFAULT_TOLERANCES)}"
            ) from None
        if min(table[name]) < 0:
            raise UsageError(f"--tol '{pair}': tolerances must be >= 0")
    return table


@dataclass(frozen=True)
class OutputCheck:
    name: str
    dtype: str
    rtol: float
    atol: float
    max_abs: float
    max_rel: float
    mismatched: int
    total: int
    ok: bool
    reason: str = ""

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        for k in ("max_abs", "max_rel"):  # JSON has no infinity
            if not np.isfinite(data[k]):
                data[k] = None
        return data


def check_outputs(
    got: Mapping[str, np.ndarray],
    want: Mapping[str, np.ndarray],
    tolerances: Mapping[str, tuple[float, float]],
) -> list[OutputCheck]:
    """One check per output of `want` (the baseline's), in its order."""
    checks = []
    extra = sorted(set(got) - set(want))
    for name, ref in want.items():
        ref = np.asarray(ref)
        key = dtype_key(ref.dtype)
        rtol, atol = tolerances.get(key, (0.0, 0.0))
        one = compare({name: got[name]} if name in got else {}, {name: ref}, rtol, atol)
        o = one.outputs[0]
        reason = o.reason
        if not reason and name in got and np.asarray(got[name]).dtype != ref.dtype:
            reason = f"dtype {np.asarray(got[name]).dtype} != {ref.dtype}"
        ok = o.ok and not reason
        checks.append(
            OutputCheck(
                name, key, rtol, atol, o.max_abs, o.max_rel, o.mismatched, o.total, ok, reason
            )
        )
    for name in extra:
        checks.append(
            OutputCheck(name, "?", 0.0, 0.0, 0.0, 0.0, 0, 0, False, "not an output of the baseline")
        )
    return checks


def merge(checks: list[list[OutputCheck]]) -> list[OutputCheck]:
    """Per output, the worst over several input sets (errors maxed, mismatches summed)."""
    merged: dict[str, OutputCheck] = {}
    for group in checks:
        for c in group:
            m = merged.get(c.name)
            if m is None:
                merged[c.name] = c
                continue
            merged[c.name] = OutputCheck(
                c.name,
                c.dtype,
                c.rtol,
                c.atol,
                max(m.max_abs, c.max_abs),
                max(m.max_rel, c.max_rel),
                m.mismatched + c.mismatched,
                m.total + c.total,
                m.ok and c.ok,
                m.reason or c.reason,
            )
    return list(merged.values())
