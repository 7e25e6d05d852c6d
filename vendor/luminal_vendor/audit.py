"""A vendor's audit: re-run a customer's bench on an equivalent machine, compare the claim.

    report (verified)  --request, method, tolerances-->  BenchRequest  --run_bench-->  raw
    claimed speedup (report's results)        reproduced interval (derive(raw))
              \\_________ inside [lower, upper]? (`AuditResult.finding`) _/

A report re-derived from rewritten timings and re-signed with the install key the license
binds passes every signature and arithmetic check: that key is on the customer's disk.  What
it cannot pass is a re-run: the same artifact, baseline model and inputs (their digests are
checked against the report first), with the report's method parameters, scenarios, batch,
threads and seed, measured again by the vendor.  The audit says whether the customer's
claimed speedup lies within the interval the vendor reproduced.

`speedup_claim` is the one place that reads a speedup and its interval out of `results`,
so a change of estimator (per-pair ratios) changes one function.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import Any

from luminal.errors import IntegrityError, UsageError
from luminal.metering.bench import BenchRequest, MethodSettings, run_bench
from luminal.metering.bench.results import derive
from luminal.references.parity import Tolerance


@dataclass(frozen=True)
class SpeedupClaim:
    """A speedup and its confidence interval, for one scenario."""

    scenario: str
    point: float
    lower: float
    upper: float

    def to_json(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "point": self.point,
            "lower": self.lower,
            "upper": self.upper,
        }


def speedup_claim(results: Mapping[str, Any], scenario: str | None = None) -> SpeedupClaim:
    """The headline speedup of `results` (or that of `scenario`), with its interval."""
    if scenario is None:
        s = results.get("speedup")
        if not s:
            raise IntegrityError("the report claims no speedup: nothing was measured")
        scenario = str(s["scenario"])
    else:
        s = results["scenarios"][scenario]["speedup"]
    return SpeedupClaim(scenario, float(s["point"]), float(s["lower"]), float(s["upper"]))


class Finding(Enum):
    WITHIN = "within"  # the claimed speedup lies inside the reproduced interval
    ABOVE = "above"  # the customer claims more speedup than the vendor reproduced
    BELOW = "below"  # the customer claims less (a smaller fee than the savings earn)


@dataclass(frozen=True)
class AuditResult:
    claimed: SpeedupClaim
    reproduced: SpeedupClaim
    verdict: str  # the re-run's validity verdict (VALID / INVALID)

    @property
    def finding(self) -> Finding:
        """Where the claimed point lies against the reproduced interval.

        Two runs on one machine can differ by more than either run's own interval says
        (measured on a loaded 2-core machine, before the paired estimator: a 3x8 Gemm's
        points spread over 10% between 1 s runs with intervals of +-5%; a 64x256 MatMul's
        points within 3%), so an audit means something on a model whose calls take tens of
        microseconds or more, on a quiet machine like the report's.
        """
        if self.claimed.point > self.reproduced.upper:
            return Finding.ABOVE
        if self.claimed.point < self.reproduced.lower:
            return Finding.BELOW
        return Finding.WITHIN

    @property
    def agrees(self) -> bool:
        return self.finding is Finding.WITHIN

    def to_json(self) -> dict[str, object]:
        return {
            "agrees": self.agrees,
            "finding": self.finding.value,
            "claimed": self.claimed.to_json(),
            "reproduced": self.reproduced.to_json(),
            "reproduced_verdict": self.verdict,
        }


def rerun_request(
    predicate: Mapping[str, Any],
    artifact: Path,
    model: Path,
    inputs: Path | None,
    work_dir: Path,
    baseline_options: Path | None = None,
) -> BenchRequest:
    """The customer's bench, as its report records it, on the vendor's copies of the files.

    The artifact is loaded without its signature being trusted here (it is the customer
    install's): what vouches for it is that its digest is the one the report measured.
    """
    req = predicate["request"]
    if predicate["baseline"].get("options_file") and baseline_options is None:
        raise UsageError(
            "the report's baseline ran with an options file: pass it with --baseline-options"
        )
    m = dict(predicate["method"])
    tolerances = {k: Tolerance(float(r), float(a)) for k, (r, a) in m["tolerances"].items()}
    names = {f.name for f in fields(MethodSettings)}
    method = MethodSettings(**{k: v for k, v in m.items() if k in names})
    return BenchRequest(
        target=artifact,
        baseline=str(req["baseline"]),
        model=model,
        work_dir=work_dir,
        scenarios=tuple(req["scenarios"]),
        batch=req["batch"],
        max_batch=int(req["max_batch"]),
        inputs=inputs,
        seed=int(req["seed"]),
        input_sets=int(req["input_sets"]),
        threads=predicate["conditions"]["threads"],
        cpus=tuple(req["cpus"]) if req.get("cpus") else None,
        method=method,
        tolerances=tolerances,
        baseline_settings=dict(req["baseline_settings"]),
        baseline_options=baseline_options,
        dims=dict(req["dims"]),
        trust_unsigned=True,
    )


def audit(
    statement: Mapping[str, Any],
    artifact: Path,
    model: Path,
    inputs: Path | None = None,
    baseline_options: Path | None = None,
) -> AuditResult:
    """Re-run the bench a (verified) report describes and compare its claimed speedup."""
    predicate = statement["predicate"]
    claimed = speedup_claim(predicate["results"])
    with tempfile.TemporaryDirectory(prefix="luminal-audit-") as work:
        req = rerun_request(predicate, artifact, model, inputs, Path(work), baseline_options)
        run = run_bench(req)
    results = derive(run.predicate)
    if claimed.scenario not in results["scenarios"]:
        raise IntegrityError(f"the re-run measured no {claimed.scenario} scenario")
    reproduced = speedup_claim(results, claimed.scenario)
    return AuditResult(claimed, reproduced, str(results["validity"]["verdict"]))
