"""Equality saturation under budgets: `rewrite(graph)` is the e-graph stage of the search.

    detect repeated blocks -> insert each block once, and the rest of the graph
    -> rounds of (analyses to saturation; every rule once) until saturated or a budget
       (rounds, e-nodes, wall seconds) is spent -> choose the cheapest term per e-class
    -> rebuild with GraphBuilder, blocks instantiated per occurrence -> check

The schedule is composed here from rulesets declared elsewhere: `analyses.ANALYSIS`, and
each family's `RULES` (declared in `rules/<family>.py` beside the terms they match).  Each
rule runs as its own ruleset, so its matches and time are measured separately
(`RuleStats`).  A budget hit is not a failure: the e-graph at that point holds only valid
equalities, so the cheapest term found so far is extracted.  Any error (a rule producing an
ill-typed term, a decode failure) returns the original graph with the reason in
`SaturationReport.fallback`: rewriting never breaks a compile.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from egglog import EGraph

from luminal.compiler.ir import spec
from luminal.compiler.ir.graph import Graph
from luminal.compiler.search.analyses import ANALYSIS
from luminal.compiler.search.rules import algebra, contraction, fusion
from luminal.compiler.search.rulesets import Rule
from luminal.compiler.search.saturation import (
    RuleStats,
    SaturationBudget,
    SaturationReport,
)
from luminal.compiler.search.terms import CONSTRUCTORS
from luminal.errors import one_line

#: Each rule family's rules, in the order a round runs them.
FAMILIES: Mapping[str, tuple[Rule, ...]] = MappingProxyType(
    {family.FAMILY.name: family.RULES for family in (algebra, contraction, fusion)}
)


#: The budget `rewrite` runs under when none is given (frozen: one shared default).
DEFAULT_BUDGET = SaturationBudget()


def family_rules(families: Sequence[str]) -> tuple[Rule, ...]:
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown rule families {unknown}; known: {sorted(FAMILIES)}")
    return tuple(rule for family in families for rule in FAMILIES[family])


@dataclass
class RunStats:
    """What saturating one e-graph did (mutable while it runs, local to one call)."""

    iterations: int = 0
    enodes: int = 0
    stop_reason: str = "saturated"
    matches: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def count_enodes(egraph: EGraph) -> int:
    return sum(egraph.function_size(ctor) for ctor in CONSTRUCTORS.values())


def saturate(
    egraph: EGraph, rules: Sequence[Rule], budget: SaturationBudget, deadline: float
) -> RunStats:
    """Run rounds of every rule until nothing changes or a budget is spent."""
    stats = RunStats()
    while True:
        if stats.iterations >= budget.iterations:
            stats.stop_reason = "iterations"
            break
        if time.perf_counter() >= deadline:
            stats.stop_reason = "seconds"
            break
        _timed(egraph, "analysis", ANALYSIS.saturate(), stats)
        changed = False
        for r in rules:
            report = _timed(egraph, f"{r.family}.{r.name}", r.ruleset, stats)
            changed |= report.updated
            if report.updated:
                stats.enodes = count_enodes(egraph)
            if time.perf_counter() >= deadline or stats.enodes > budget.enodes:
                break
        stats.iterations += 1
        if time.perf_counter() >= deadline:
            stats.stop_reason = "seconds"
            break
        if stats.enodes > budget.enodes:
            stats.stop_reason = "enodes"
            break
        if not changed:
            stats.stop_reason = "saturated"
            break
    _timed(egraph, "analysis", ANALYSIS.saturate(), stats)  # types for the last round
    stats.enodes = count_enodes(egraph)
    return stats


def _timed(egraph: EGraph, key: str, schedule, stats: RunStats):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    report = egraph.run(schedule)
    stats.seconds[key] = stats.seconds.get(key, 0.0) + time.perf_counter() - start
    found = sum(report.num_matches_per_rule.values())
    stats.matches[key] = stats.matches.get(key, 0) + found
    return report


def rewrite(
    graph: Graph,
    budget: SaturationBudget = DEFAULT_BUDGET,
    families: tuple[str, ...] = ("algebra", "contraction", "fusion"),
) -> tuple[Graph, SaturationReport]:
    """Rewrite `graph` by equality saturation; the result computes the same outputs."""
    from luminal.compiler.search import plan  # the block-aware driver (imports this module)

    rules = family_rules(families)  # an unknown family is the caller's bug: raise
    start = time.perf_counter()
    try:
        result = plan.run(graph, rules, budget, start + budget.seconds)
        out = result.graph
        _check_same_interface(graph, out)
        fallback = None
    except Exception as err:  # never break a compile: keep the original, say why
        result = None
        out, fallback = graph, f"{type(err).__name__}: {one_line(err)}"
    # egglog's EGraph may only be dropped on the thread that made it; the encodings sit in
    # reference cycles, so collect them here rather than on whatever thread (a progress
    # bar's, say) the collector next runs on.
    gc.collect()
    seconds = time.perf_counter() - start
    stats = result.stats if result is not None else RunStats(stop_reason="saturated")
    rule_stats = tuple(
        RuleStats(key.split(".", 1)[-1], key.split(".", 1)[0], stats.matches.get(key, 0), secs)
        for key, secs in stats.seconds.items()
    )
    report = SaturationReport(
        iterations=stats.iterations,
        enodes=stats.enodes,
        seconds=seconds,
        stop_reason=stats.stop_reason,
        rules=rule_stats,
        blocks=result.blocks if result is not None else 0,
        block_instances=result.block_instances if result is not None else 0,
        nodes_before=len(graph.nodes),
        nodes_after=len(out.nodes),
        rewrites_applied=result.applied if result is not None else {},
        fallback=fallback,
    )
    return out, report


def _check_same_interface(before: Graph, after: Graph) -> None:
    spec.check(after)
    if after.input_specs() != before.input_specs():
        raise AssertionError(f"inputs changed: {after.input_specs()} != {before.input_specs()}")
    if after.output_specs() != before.output_specs():
        raise AssertionError(f"outputs changed: {after.output_specs()} != {before.output_specs()}")


__all__ = ["RuleStats", "SaturationBudget", "SaturationReport", "rewrite"]
