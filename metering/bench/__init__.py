"""A fair A/B benchmark of a compiled model against the customer's baseline.

    environment  same CPUs and thread count for both arms; machine fingerprint
    inputs       seeded or customer input sets and their digest
    method       warm-up, then interleaved blocks until the interval is narrow (injectable clock)
    outputs      parity with tolerances per dtype (the rule: `luminal.references.parity`)
    audit        TEST01 (outputs sampled while timed) and TEST04 (repeated vs fresh, by interval)
    stats        percentiles, CV, the paired speedup estimator and its t-interval
    validity     VALID (the interval is narrow enough to bill on) / INVALID, why, what to do
    results      every derived number from the raw data (what `report verify` recomputes)
    run          one benchmark from start to finish

The baselines themselves (the plug-in interface, built-ins, the `luminal.baselines`
group) are `luminal.references.baselines`, shared with `luminal run --compare`.
See docs/benchmarking.md for the method and every report field.
"""

from luminal.metering.bench.method import MethodSettings
from luminal.metering.bench.results import derive
from luminal.metering.bench.run import BenchRequest, BenchRun, run_bench

__all__ = ["BenchRequest", "BenchRun", "MethodSettings", "derive", "run_bench"]
