"""What an equality-saturation run (`saturate.rewrite`) is given and what it reports: its
budget, each rule's statistics and the run's report.  Apart from `saturate.py`, so that
what only reads a report (the pipeline's stages, the compile cache, the CLI) does not
import egglog, a third of `luminal`'s start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

STOP_REASONS = ("saturated", "iterations", "enodes", "seconds")


@dataclass(frozen=True)
class SaturationBudget:
    iterations: int = 8
    enodes: int = 50_000
    seconds: float = 10.0


@dataclass(frozen=True)
class RuleStats:
    name: str
    family: str
    matches: int
    seconds: float


@dataclass(frozen=True)
class SaturationReport:
    iterations: int
    enodes: int
    seconds: float
    stop_reason: str  # "saturated" | "iterations" | "enodes" | "seconds"
    rules: tuple[RuleStats, ...]
    blocks: int
    block_instances: int
    nodes_before: int
    nodes_after: int
    rewrites_applied: dict[str, int]  # family -> extracted nodes that are not original
    fallback: str | None = None  # why the original graph was returned, if it was
    cached: bool = False  # the graph came from the compile cache (this is its first report)

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["rules"] = [asdict(r) for r in self.rules]
        return out

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> SaturationReport:
        """The report `to_json` wrote (the compile cache keeps it with its graph)."""
        fields = {k: v for k, v in d.items() if k in SaturationReport.__dataclass_fields__}
        fields["rules"] = tuple(RuleStats(**r) for r in d["rules"])
        fields["rewrites_applied"] = dict(d["rewrites_applied"])
        return SaturationReport(**fields)

    def format(self, verbose: bool = False) -> str:
        """One summary line; with `verbose`, one line per rule that matched."""
        head = (
            f"e-graph: {self.nodes_before} -> {self.nodes_after} nodes, "
            f"{self.iterations} rounds, {self.enodes} e-nodes, {self.seconds:.2f} s "
            f"({self.stop_reason}); blocks {self.blocks} x {self.block_instances} instances"
        )
        if self.cached:
            head += "; from the compile cache"
        if self.fallback:
            head += f"; kept the original graph: {self.fallback}"
        if not verbose:
            return head
        lines = [head]
        for r in sorted(self.rules, key=lambda r: (-r.seconds, r.family, r.name)):
            lines.append(f"  {r.family:<12} {r.name:<26} {r.matches:>8} matches {r.seconds:8.4f} s")
        applied = ", ".join(f"{k} {v}" for k, v in self.rewrites_applied.items())
        lines.append(f"  rewritten nodes by family: {applied or 'none'}")
        return "\n".join(lines)


__all__ = ["STOP_REASONS", "RuleStats", "SaturationBudget", "SaturationReport"]
