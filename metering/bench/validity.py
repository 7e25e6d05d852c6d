"""Is a run VALID?  Every check is a pure function of the report's raw data.

A run is VALID only if all of these hold, else INVALID with the failed checks as reasons:

    parity              every output of the compiled model matches the baseline's, on every
                        input set, within the tolerance for its dtype
    <scenario>.duration the timed phase lasted at least `duration_s`
    <scenario>.runs     each arm made at least `min_runs` timed runs
    <scenario>.blocks   at least `min_blocks` interleaved rounds (the bootstrap's pairs)
    <scenario>.spread   each arm's coefficient of variation of block means <= `max_cv`
    test01              outputs sampled during the timed phase match the baseline's
    test04              median(fresh input) / median(repeated input) <= 1 + threshold

A warm-up that did not settle is reported as a warning, not a failure: the timed phase's
spread check already judges stability.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from luminal.metering.bench.stats import ArmStats


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class Validity:
    checks: tuple[Check, ...]
    warnings: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def reasons(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": "VALID" if self.valid else "INVALID",
            "valid": self.valid,
            "reasons": self.reasons,
            "warnings": list(self.warnings),
            "checks": [c.to_json() for c in self.checks],
        }


def judge(
    raw: Mapping[str, Any],
    stats: Mapping[str, Mapping[str, ArmStats]],
    test04_ratio: float | None,
) -> Validity:
    method = raw["method"]
    checks: list[Check] = []
    warnings: list[str] = []
    outputs = raw["parity"]["outputs"]
    bad = [o["name"] for o in outputs if not o["ok"]]
    checks.append(
        Check(
            "parity",
            bool(outputs) and not bad,
            f"outputs {bad} differ from the baseline beyond tolerance"
            if bad
            else f"{len(outputs)} output(s) within tolerance on {raw['parity']['sets']} input set(s)",
        )
    )
    for scenario, sc in raw["scenarios"].items():
        if sc.get("skipped"):
            continue
        m = sc["measurement"]
        elapsed = m["elapsed_ns"] / 1e9
        checks.append(
            Check(
                f"{scenario}.duration",
                elapsed >= method["duration_s"],
                f"timed phase {elapsed:.3f} s, minimum {method['duration_s']:g} s",
            )
        )
        arms = stats[scenario]
        runs = {a: s.runs for a, s in arms.items()}
        checks.append(
            Check(
                f"{scenario}.runs",
                min(runs.values()) >= method["min_runs"],
                f"runs {runs}, minimum {method['min_runs']} per arm",
            )
        )
        rounds = len(m["order"])
        checks.append(
            Check(
                f"{scenario}.blocks",
                rounds >= method["min_blocks"],
                f"{rounds} paired blocks, minimum {method['min_blocks']}",
            )
        )
        cvs = {a: round(s.cv, 4) for a, s in arms.items()}
        checks.append(
            Check(
                f"{scenario}.spread",
                max(cvs.values()) <= method["max_cv"],
                f"coefficient of variation of block means {cvs}, maximum {method['max_cv']:g}",
            )
        )
        for arm, rec in m["arms"].items():
            if not rec["settled"]:
                warnings.append(f"{scenario}: warm-up of {arm} did not settle")
    samples = raw["audit"]["test01"]["samples"]
    failed = [s for s in samples if not s["ok"]]
    checks.append(
        Check(
            "test01",
            bool(samples) and not failed,
            "no outputs were sampled during the timed run"
            if not samples
            else (
                f"{len(failed)} of {len(samples)} outputs sampled during the timed run differ "
                f"from the baseline (first: round {failed[0]['round']}, input set "
                f"{failed[0]['input_set']}, outputs {failed[0]['failed']})"
                if failed
                else f"{len(samples)} outputs sampled during the timed run match the baseline"
            ),
        )
    )
    threshold = method["audit_threshold"]
    if test04_ratio is None:
        checks.append(Check("test04", False, "the repeated-input audit did not run"))
    else:
        checks.append(
            Check(
                "test04",
                test04_ratio <= 1 + threshold,
                f"repeated input runs {test04_ratio:.3f}x as fast as fresh inputs, "
                f"maximum {1 + threshold:.2f}x"
                + (" (results look cached)" if test04_ratio > 1 + threshold else ""),
            )
        )
    return Validity(tuple(checks), tuple(warnings))
