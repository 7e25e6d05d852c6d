"""Acceptance: the reference interpreter running each suite model's ONNX lowering
matches ONNX Runtime within rtol 1e-4, atol 1e-5 (fp32)."""

from __future__ import annotations

import pytest

from luminal.compiler.frontend.onnx import load
from luminal.compiler.ir import interpreter, spec
from luminal.references.oracle import run_oracle
from luminal.references.parity import Tolerance, compare


@pytest.mark.parametrize("name", ["mlp", "cnn", "encoder", "gpt"])
def test_suite_model_matches_onnxruntime(name: str, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx(name)
    model = load(path)
    spec.check(model.graph)
    got = interpreter.run(model.graph, feeds)
    want = run_oracle("onnxruntime", path, feeds)
    parity = compare(got, want, Tolerance(1e-4, 1e-5))
    assert parity.ok, parity.to_json()
    # The decomposition really is primitive: no framework op survives into the IR.
    assert {n.op.value for n in model.graph.nodes} <= {
        op.value for op in type(model.graph.nodes[0].op)
    }
