"""Every suite model through the e-graph stage with the default budget: the rewritten
graph checks, keeps the model's interface, computes the same outputs on the example
inputs, schedules into no more kernels, and the report accounts for the work."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.frontend import load_model
from luminal.compiler.ir import interpreter, spec
from luminal.compiler.schedule import schedule
from luminal.compiler.search.saturate import rewrite

#: model -> (fewest scheduled kernels the rewrite must remove, repeated blocks expected).
#: Each model takes 1-3 s here (export, rewrite, two interpreter runs).
CASES = {
    "mlp": (0, True),
    "cnn": (0, True),
    "encoder": (6, True),
    # 9 since shared chains materialize only their end (partition.py): the unrewritten
    # graph schedules to 46 kernels instead of more, the rewritten one to 37
    "gpt": (9, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_suite_model_rewrites_preserve_semantics(name: str, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx(name)
    graph = load_model(path).graph
    out, report = rewrite(graph)
    assert report.fallback is None, report.fallback
    spec.check(out)
    assert out.input_specs() == graph.input_specs()
    assert out.output_specs() == graph.output_specs()
    want, got = interpreter.run(graph, feeds), interpreter.run(out, feeds)
    for key, value in want.items():
        scale = float(np.max(np.abs(value)))
        np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5 * scale)

    removed, repeated = CASES[name]
    before, after = len(schedule(graph).kernels), len(schedule(out).kernels)
    assert after <= before - removed
    assert report.seconds < 10
    assert report.nodes_before == len(graph.nodes) and report.nodes_after == len(out.nodes)
    assert report.iterations >= 1 and report.enodes > 0
    assert any(r.matches > 0 for r in report.rules if r.family != "analysis")
    assert (report.blocks >= 1 and report.block_instances >= 2) == repeated
