"""Output parity of the compiled model against the baseline, with tolerances per dtype.

The rule and the defaults are `luminal.references.parity`'s (its OUTPUT check): an element
passes when |got - want| <= atol + rtol x |want|; integer and bool outputs must match
exactly, NaNs and infinities must sit in the same places.  The tolerance is chosen by the
dtype of the baseline's output; `--tol DTYPE=RTOL,ATOL` overrides one dtype's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType

import numpy as np

from luminal.errors import UsageError
from luminal.references.parity import (
    EXACT,
    FLOAT_KEYS,
    Check,
    Tolerance,
    compare_arrays,
    dtype_key,
    is_float,
    tolerance_for,
)

#: The OUTPUT check's tolerance per float dtype; integer and bool outputs are always exact.
DEFAULT_TOLERANCES: Mapping[str, Tolerance] = MappingProxyType(
    {k: tolerance_for(k, Check.OUTPUT) for k in FLOAT_KEYS}
)


def parse_tolerances(pairs: list[str] | None) -> dict[str, Tolerance]:
    """DEFAULT_TOLERANCES updated by `DTYPE=RTOL,ATOL` pairs (e.g. `f32=1e-3,1e-4`)."""
    table = dict(DEFAULT_TOLERANCES)
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        rtol, comma, atol = value.partition(",")
        try:
            if not sep or not comma or name not in DEFAULT_TOLERANCES:
                raise ValueError
            table[name] = Tolerance(float(rtol), float(atol))
        except ValueError:
            raise UsageError(
                f"--tol '{pair}': expected DTYPE=RTOL,ATOL with DTYPE one of "
                f"{', '.join(DEFAULT_TOLERANCES)}"
            ) from None
        if min(table[name].rtol, table[name].atol) < 0:
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
    tolerances: Mapping[str, Tolerance],
) -> list[OutputCheck]:
    """One check per output of `want` (the baseline's), in its order."""
    checks = []
    extra = sorted(set(got) - set(want))
    for name, ref in want.items():
        ref = np.asarray(ref)
        key = dtype_key(ref.dtype)
        tol = tolerances.get(key, EXACT) if is_float(ref.dtype) else EXACT
        result: tuple[float, float, int, int, bool, str]
        if name in got:
            o = compare_arrays(name, got[name], ref, tol)
            found = np.asarray(got[name]).dtype
            reason = o.reason or (f"dtype {found} != {ref.dtype}" if found != ref.dtype else "")
            result = (o.max_abs, o.max_rel, o.mismatched, o.total, o.ok and not reason, reason)
        else:
            result = (np.inf, np.inf, ref.size, ref.size, False, "missing")
        checks.append(OutputCheck(name, key, tol.rtol, tol.atol, *result))
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
