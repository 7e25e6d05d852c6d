"""Is a run VALID, i.e. can both sides bill on it?  Every check is a pure function of the
report's raw data and its derived statistics.

A run is VALID only if all of these hold, else INVALID with the failed checks as reasons
(in words) and one line saying what to do:

    parity              every output of the compiled model matches the baseline's, on every
                        input set, within the tolerance for its dtype
    <scenario>.duration the timed phase lasted at least `duration_s`
    <scenario>.runs     each arm made at least `min_runs` timed runs
    <scenario>.blocks   at least `min_blocks` interleaved rounds (the estimator's pairs)
    <scenario>.interval the speedup interval's relative half-width is at most
                        `target_halfwidth`: narrow enough to bill on its lower bound
    test01              outputs sampled during the timed phase match the baseline's
    test04              the fresh/repeated interval does not show caching (`audit.caching`)

The question is not "was the machine quiet" (a fixed cap on each arm's spread, which a
shared machine never meets) but "is the interval narrow enough to bill on": paired rounds
cancel the noise both arms share, and what is left widens the interval, which more rounds
narrow.  Each arm's CV of block means stays in the report as information.  A warm-up that
did not settle, and a TEST04 that could not rule caching in or out, are warnings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from luminal.metering.bench.audit import Caching
from luminal.metering.bench.stats import ArmStats, Ratio

CHECK_FIRST = ("parity", "test01", "test04")  # whose fix is said first: correctness


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""  # what to do when it fails, one clause

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

    @property
    def fix(self) -> str | None:
        """One line: what to do about the first failed check (correctness first)."""
        failed = sorted(
            (c for c in self.checks if not c.ok),
            key=lambda c: CHECK_FIRST.index(c.name) if c.name in CHECK_FIRST else 99,
        )
        return failed[0].fix if failed else None

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": "VALID" if self.valid else "INVALID",
            "valid": self.valid,
            "reasons": self.reasons,
            "fix": self.fix,
            "warnings": list(self.warnings),
            "checks": [c.to_json() for c in self.checks],
        }


def judge(
    raw: Mapping[str, Any],
    stats: Mapping[str, Mapping[str, ArmStats]],
    speedups: Mapping[str, Ratio],
    test04: Ratio | None,
    cached: Caching,
) -> Validity:
    method = raw["method"]
    checks: list[Check] = [_parity(raw["parity"])]
    warnings: list[str] = []
    for scenario, sc in raw["scenarios"].items():
        if sc.get("skipped"):
            continue
        m = sc["measurement"]
        elapsed = m["elapsed_ns"] / 1e9
        runs = {a: s.runs for a, s in stats[scenario].items()}
        rounds = len(m["order"])
        short = max(  # how many times longer the counts need the timed phase to be
            method["min_blocks"] / max(rounds, 1),
            method["min_runs"] / max(min(runs.values()), 1),
            method["duration_s"] / max(elapsed, 1e-9),
        )
        longer = f"run longer with --duration {_nice(elapsed * short * 1.2)}"
        checks.append(
            Check(
                f"{scenario}.duration",
                elapsed >= method["duration_s"],
                f"timed phase {elapsed:.3f} s, minimum {method['duration_s']:g} s",
                longer,
            )
        )
        checks.append(
            Check(
                f"{scenario}.runs",
                min(runs.values()) >= method["min_runs"],
                f"runs {runs}, minimum {method['min_runs']} per arm",
                f"{longer}, or lower --min-runs",
            )
        )
        checks.append(
            Check(
                f"{scenario}.blocks",
                rounds >= method["min_blocks"],
                f"{rounds} paired blocks, minimum {method['min_blocks']}",
                f"{longer}, or lower --min-blocks",
            )
        )
        checks.append(_interval(scenario, speedups[scenario], stats[scenario], elapsed, method))
        for arm, rec in m["arms"].items():
            if not rec["settled"]:
                warnings.append(f"{scenario}: warm-up of {arm} did not settle")
    checks.append(_test01(raw["audit"]["test01"]["samples"]))
    check04 = _test04(test04, cached, method["audit_threshold"])
    checks.append(check04)
    if cached is Caching.INCONCLUSIVE:
        r = test04
        assert r is not None
        warnings.append(
            f"test04: too noisy to rule caching in or out (interval [{r.lower:.3f}, "
            f"{r.upper:.3f}]); not held against the run"
        )
    return Validity(tuple(checks), tuple(warnings))


def _parity(parity: Mapping[str, Any]) -> Check:
    outputs = parity["outputs"]
    bad = [o["name"] for o in outputs if not o["ok"]]
    return Check(
        "parity",
        bool(outputs) and not bad,
        f"outputs {bad} differ from the baseline beyond tolerance"
        if bad
        else f"{len(outputs)} output(s) within tolerance on {parity['sets']} input set(s)",
        "check that the artifact was compiled from this model (--model) and its tolerances "
        "(--tol); nothing can be billed on different outputs",
    )


def _interval(
    scenario: str,
    r: Ratio,
    arms: Mapping[str, ArmStats],
    elapsed: float,
    method: Mapping[str, Any],
) -> Check:
    target = method["target_halfwidth"]
    cvs = ", ".join(f"{a} {s.cv:.1%}" for a, s in arms.items())
    if r.halfwidth is None:
        return Check(
            f"{scenario}.interval",
            False,
            f"{r.pairs} paired block(s): too few for an interval",
            f"run longer with --duration {_nice(max(elapsed, method['duration_s']) * 2)}",
        )
    ok = r.halfwidth <= target
    # the half-width shrinks as 1/sqrt(rounds): the time the target needs at this noise
    needed = elapsed * (r.halfwidth / target) ** 2 * 1.2
    return Check(
        f"{scenario}.interval",
        ok,
        f"the speedup interval is ±{r.halfwidth:.1%}, "
        + (
            f"within the ±{target:.0%} needed to bill on"
            if ok
            else f"wider than the ±{target:.0%} needed to bill on"
        )
        + f" ({r.pairs} paired blocks; CV of block means {cvs})",
        f"run longer with --duration {_nice(needed)}"
        + (", use longer blocks with --block-ms 200" if method["block_s"] < 0.2 else "")
        + ", pin cores nothing else uses with --cpus, or stop other work on the machine",
    )


def _test01(samples: list[Mapping[str, Any]]) -> Check:
    failed = [s for s in samples if not s["ok"]]
    if not samples:
        detail = "no outputs were sampled during the timed run"
    elif failed:
        detail = (
            f"{len(failed)} of {len(samples)} outputs sampled during the timed run differ "
            f"from the baseline (first: round {failed[0]['round']}, input set "
            f"{failed[0]['input_set']}, outputs {failed[0]['failed']})"
        )
    else:
        detail = f"{len(samples)} outputs sampled during the timed run match the baseline"
    return Check(
        "test01",
        bool(samples) and not failed,
        detail,
        "the compiled model's outputs change while it is timed: do not bill on it; send the "
        "report to the vendor",
    )


def _test04(r: Ratio | None, cached: Caching, threshold: float) -> Check:
    fix = (
        "the compiled model answers inputs it has seen faster (cached results): do not bill "
        "on it; send the report to the vendor"
    )
    if r is None or cached is Caching.NOT_RUN:
        return Check("test04", False, "the repeated-input audit did not run", fix)
    pct = round(100 * r.confidence)
    said = (
        f"fresh inputs take {r.point:.3f}x the time of a repeated input "
        f"({pct}% interval [{r.lower:.3f}, {r.upper:.3f}]"
    )
    limit = f"{1 + threshold:.2f}x"
    detail = {
        Caching.CLEAR: f"{said}, within {limit}): no caching",
        Caching.INCONCLUSIVE: f"{said}, reaching past {limit}): too noisy to tell caching "
        "from noise; not held against the run",
        Caching.CACHED: f"{said}, above {limit} even at its lower bound): results look cached",
    }[cached]
    return Check("test04", cached is not Caching.CACHED, detail, fix)


def _nice(seconds: float) -> int:
    """A duration to suggest: whole seconds, rounded up to 10 s (5 s below 10)."""
    if not math.isfinite(seconds):
        return 600
    step = 5 if seconds < 10 else 10
    return max(step, math.ceil(seconds / step) * step)
