"""Every derived number of a benchmark, computed from its raw data alone.

`derive(raw)` is what `luminal bench` writes under `results` and what `luminal report
verify` recomputes and compares.  `raw` is the report predicate (JSON): method settings,
per-scenario raw timings, parity and audit observations, pricing terms.  It is
deterministic (closed-form statistics, no random numbers), so a recomputation is exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import numpy as np

from luminal.licensing.pricing import quote
from luminal.metering.bench import stats
from luminal.metering.bench.audit import Caching, caching, fresh_over_repeated
from luminal.metering.bench.validity import judge

BASELINE, CANDIDATE = "baseline", "luminal"


def derive(raw: Mapping[str, Any]) -> dict[str, Any]:
    method = raw["method"]
    confidence = method["confidence"]
    per_scenario: dict[str, dict[str, Any]] = {}
    arm_stats: dict[str, dict[str, stats.ArmStats]] = {}
    speedups: dict[str, stats.Ratio] = {}
    for name, sc in raw["scenarios"].items():
        if sc.get("skipped"):
            continue
        arms = sc["measurement"]["arms"]
        arm_stats[name] = {
            a: stats.arm_stats(rec["blocks"], sc["batch"]) for a, rec in arms.items()
        }
        speedups[name] = stats.paired_blocks(
            arms[BASELINE]["blocks"], arms[CANDIDATE]["blocks"], confidence
        )
        per_scenario[name] = {
            **{a: s.to_json() for a, s in arm_stats[name].items()},
            "speedup": speedups[name].to_json(),
        }
        if "generation" in sc:  # the llm scenario (metering/bench/llm.py)
            per_scenario[name]["generation"] = generation(sc["generation"], sc["batch"])
    t04 = raw["audit"]["test04"]
    ratio04 = fresh_over_repeated(t04.get("fresh_ns"), t04.get("repeated_ns"), confidence)
    cached = caching(ratio04, method["audit_threshold"])
    validity = judge(raw, arm_stats, speedups, ratio04, cached)
    headline = None
    if per_scenario:
        name = min(per_scenario, key=lambda n: per_scenario[n]["speedup"]["lower"])
        # an INVALID run keeps its numbers (they are re-derived like any other) but says
        # they are not billable, and no rendering shows them as a headline
        headline = {"scenario": name, **per_scenario[name]["speedup"], "billable": validity.valid}
    return {
        "scenarios": per_scenario,
        "test04": {
            "ratio": ratio04.to_json() if ratio04 else None,
            "threshold": method["audit_threshold"],
            "outcome": cached.value,
            "ok": cached in (Caching.CLEAR, Caching.INCONCLUSIVE),
        },
        "validity": validity.to_json(),
        "speedup": headline,
        "savings": savings(raw.get("pricing"), headline, validity.valid),
    }


def generation(raw: Mapping[str, Any], batch: int) -> dict[str, Any]:
    """Per arm, the median time to first token and decode tokens per second (every
    sequence's tokens over one generation's summed step time) over the phase runs; and
    luminal's ratios to the baseline (above 1: luminal is better)."""
    arms: dict[str, dict[str, float]] = {}
    for arm, rec in raw.items():
        tps = [batch * len(s) / (sum(s) / 1e9) for s in rec["step_ns"] if s and sum(s) > 0]
        arms[arm] = {
            "ttft_ms": float(np.median(rec["ttft_ns"])) / 1e6,
            "decode_tokens_per_s": float(np.median(tps)) if tps else 0.0,
            "runs": len(rec["ttft_ns"]),
        }
    base, cand = arms[BASELINE], arms[CANDIDATE]
    return {
        **arms,
        "ttft_speedup": base["ttft_ms"] / cand["ttft_ms"] if cand["ttft_ms"] else None,
        "decode_speedup": (
            cand["decode_tokens_per_s"] / base["decode_tokens_per_s"]
            if base["decode_tokens_per_s"]
            else None
        ),
    }


def savings(
    pricing: Mapping[str, Any] | None, headline: Mapping[str, Any] | None, valid: bool
) -> dict[str, Any]:
    """`price_per_hour x (1 - 1/speedup_lower)` and the licensed share, only for a VALID run
    whose lower bound is above 1 and a known price.  `billable` only under production terms
    (`licensing.terms`): evaluation terms are shown, never billed."""
    base: dict[str, Any] = {"claimed": False, "billable": False, "basis": "speedup_lower_bound"}
    if pricing is None or pricing.get("price_per_hour") is None:
        return {
            **base,
            **({"pricing": dict(pricing)} if pricing is not None else {}),
            "reason": "no price known: the license has no price for this device",
        }
    base.update(pricing=dict(pricing))
    if headline is None:
        return {**base, "reason": "nothing was measured"}
    if not valid:
        return {**base, "reason": "the run is INVALID: no savings are claimed"}
    lower = headline["lower"]
    if not np.isfinite(lower) or lower <= 1:
        return {**base, "reason": f"the speedup's lower bound {lower:.4g} is not above 1"}
    basis = Decimal(repr(lower))
    per_hour = quote(
        pricing["price_per_hour"], basis, pricing["share"], currency=pricing["currency"]
    )
    per_1000 = quote(
        pricing["price_per_hour"],
        basis,
        pricing["share"],
        hours=1000,
        currency=pricing["currency"],
    )
    return {
        **base,
        "claimed": True,
        "billable": pricing.get("terms") == "production",
        "speedup": str(basis),
        "per_hour": per_hour.to_json(),
        "per_1000_hours": per_1000.to_json(),
    }
