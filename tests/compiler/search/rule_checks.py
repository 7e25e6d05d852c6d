"""What every rule-family test asks of a rewrite: did the rule fire, and does the
rewritten graph compute what the original did on the reference interpreter."""

from __future__ import annotations

import numpy as np

from luminal.compiler.ir import interpreter
from luminal.compiler.ir.graph import Graph
from luminal.compiler.search.saturate import SaturationReport


def feeds_for(graph: Graph, positive: bool = False) -> dict[str, np.ndarray]:
    """Normal inputs (seeded), or positive ones (|x| + 0.5) for rules that need x > 0."""
    rng = np.random.default_rng(1)
    out = {}
    for spec in graph.input_specs():
        x = rng.standard_normal(spec.shape)
        out[spec.name] = (np.abs(x) + 0.5 if positive else x).astype(spec.dtype.np)
    return out


def assert_same(before: Graph, after: Graph, positive: bool = False, rtol: float = 1e-5) -> None:
    feeds = feeds_for(before, positive)
    want, got = interpreter.run(before, feeds), interpreter.run(after, feeds)
    for name, value in want.items():
        scale = max(1.0, float(np.max(np.abs(value))))
        np.testing.assert_allclose(got[name], value, rtol=rtol, atol=rtol * scale)


def fired(report: SaturationReport, name: str) -> bool:
    assert report.fallback is None, report.fallback
    return any(r.name == name and r.matches > 0 for r in report.rules)
