"""Output parity of the compiled model against the baseline, with tolerances per dtype.

The rule and the defaults are `luminal.references.parity`'s (its OUTPUT check): an element
passes when |got - want| <= atol + rtol x |want|; integer and bool outputs must match
exactly, NaNs and infinities must sit in the same places; an output the model computes
through quantization may also be one quantization step off (`references.quant_steps`).
The tolerance is chosen by the dtype of the baseline's output; `--tol DTYPE=RTOL,ATOL`
overrides one dtype's.  An artifact built at a reduced precision (`--precision
fp16|bf16`) holds every float output the user did not set with `--tol` to its
precision's bound instead (`for_precision`, from `references.parity.precision_tolerance`,
the one table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from luminal.errors import UsageError
from luminal.references.parity import (
    EXACT,
    FLOAT_KEYS,
    Check,
    OutputParity,
    Tolerance,
    compare_arrays,
    dtype_key,
    is_float,
    precision_tolerance,
    tolerance_for,
    with_spread,
    with_step,
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


def for_precision(table: Mapping[str, Tolerance], precision: object) -> dict[str, Tolerance]:
    """`table` for an artifact built at `precision` (its manifest's `options.precision`):
    each float dtype still at its default takes the precision's bound; one set by `--tol`
    stays as set.  fp32 (or a manifest from before precision existed): `table` itself.
    The bound keeps its scale clause (the allowance by the output's magnitude), which the
    report records as a third number: `{dtype: [rtol, atol, scale]}`."""
    bound = precision_tolerance(str(precision or "fp32"))
    if bound is None:
        return dict(table)
    return {
        k: bound if k in FLOAT_KEYS and t == DEFAULT_TOLERANCES.get(k) else t
        for k, t in table.items()
    }


@dataclass(frozen=True)
class OutputCheck:
    """One output's verdict in a bench (`references.parity`'s record) and the dtype key
    its tolerance was chosen by; `to_json` is the report's flat record."""

    dtype: str
    parity: OutputParity

    @property
    def name(self) -> str:
        return self.parity.name

    @property
    def max_abs(self) -> float:
        return self.parity.max_abs

    @property
    def ok(self) -> bool:
        return self.parity.ok

    def to_json(self) -> dict[str, object]:
        p = self.parity
        data: dict[str, object] = {
            "name": p.name,
            "dtype": self.dtype,
            "rtol": p.tolerance.rtol,
            "atol": p.tolerance.atol,
            "max_abs": p.max_abs,
            "max_rel": p.max_rel,
            "mismatched": p.mismatched,
            "total": p.total,
            "ok": p.ok,
            "reason": p.reason,
        }
        if p.tolerance.step:  # one quantization step allowed (references.quant_steps)
            data["step"] = p.tolerance.step
        if p.tolerance.spread:  # the reference's own spread (references.spread)
            data["spread"] = p.tolerance.spread
        for k in ("max_abs", "max_rel"):  # JSON has no infinity
            if not np.isfinite(data[k]):  # type: ignore[arg-type]
                data[k] = None
        return data


def check_outputs(
    got: Mapping[str, np.ndarray],
    want: Mapping[str, np.ndarray],
    tolerances: Mapping[str, Tolerance],
    steps: Mapping[str, float] | None = None,
    spreads: Mapping[str, float] | None = None,
) -> list[OutputCheck]:
    """One check per output of `want` (the baseline's), in its order; `steps` allow one
    quantization step on the outputs computed through quantization, `spreads` the
    reference's own spread on a quantized model's outputs (`references.parity`)."""
    checks = []
    for name, ref in want.items():
        ref = np.asarray(ref)
        key = dtype_key(ref.dtype)
        tol = tolerances.get(key, EXACT) if is_float(ref.dtype) else EXACT
        tol = with_step(tol, (steps or {}).get(name, 0.0))
        tol = with_spread(tol, (spreads or {}).get(name, 0.0))
        if name in got:
            o = compare_arrays(name, got[name], ref, tol)
            found = np.asarray(got[name]).dtype
            if not o.reason and found != ref.dtype:
                o = replace(o, ok=False, reason=f"dtype {found} != {ref.dtype}")
        else:
            o = OutputParity(name, tol, np.inf, np.inf, ref.size, ref.size, False, "missing")
        checks.append(OutputCheck(key, o))
    for name in sorted(set(got) - set(want)):
        extra = OutputParity(name, EXACT, 0.0, 0.0, 0, 0, False, "not an output of the baseline")
        checks.append(OutputCheck("?", extra))
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
            a, b = m.parity, c.parity
            worst = replace(
                b,
                max_abs=max(a.max_abs, b.max_abs),
                max_rel=max(a.max_rel, b.max_rel),
                mismatched=a.mismatched + b.mismatched,
                total=a.total + b.total,
                ok=a.ok and b.ok,
                reason=a.reason or b.reason,
            )
            merged[c.name] = OutputCheck(c.dtype, worst)
    return list(merged.values())
