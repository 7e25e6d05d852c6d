"""A report as github-action-benchmark input (`tool: customSmallerIsBetter`).

One entry per measured scenario and arm: the median time of one run (a batch, for the
throughput scenario) in milliseconds, smaller is better, `range` one standard deviation,
and `extra` the speedup with its interval and the verdict, so a chart of the luminal arm
over commits shows a regression and the tooltip says against what::

    [{"name": "luminal vs onnxruntime: latency (batch 1), luminal p50", "unit": "ms",
      "value": 0.0123, "range": "± 0.0004", "extra": "speedup 2.01x [1.95, 2.07] ..."}]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from luminal.metering.report.view import ARMS, fmt_speedup, view


def render(statement: Mapping[str, Any]) -> list[dict[str, object]]:
    v = view(statement)
    results = statement["predicate"]["results"]
    entries: list[dict[str, object]] = []
    for sc in v.scenarios:
        stats = results["scenarios"][sc.name]
        speed = (
            f"speedup {fmt_speedup(sc.speedup)}"
            if v.verdict == "VALID"
            else "speedup not billable (INVALID)"
        )
        for arm, label in ARMS:
            a = stats[arm]
            mean_ms = a["mean_ns"] / 1e6
            entries.append(
                {
                    "name": f"{v.title}: {sc.name} (batch {sc.batch}), {label} p50",
                    "unit": "ms",
                    "value": round(a["p50_ns"] / 1e6, 6),
                    "range": f"± {a['cv'] * mean_ms:.4g}",
                    "extra": (
                        f"{speed}; {v.verdict}; p90 {a['p90_ns'] / 1e6:.4g} ms, "
                        f"{a['runs']} runs, {a['throughput']:.4g} items/s"
                    ),
                }
            )
    return entries
