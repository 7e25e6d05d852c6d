"""Every ONNX op case, compiled to C and run natively, against ONNX Runtime."""

from __future__ import annotations

import onnx
import pytest

from luminal.compiler.frontend.onnx import load
from luminal.references.oracle import run_oracle
from luminal.references.parity import Tolerance, compare
from tests.helpers.compiled import compile_and_run
from tests.helpers.onnx_cases import CASES, feeds_of, node_model


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "consts", "extra"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_compiled_op_matches_onnxruntime(op, inputs, attrs, consts, extra, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = node_model(op, inputs, attrs, consts=consts, **extra)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    feeds = feeds_of(model, inputs, consts)
    got = compile_and_run(load(path).graph, feeds, tmp_path)
    want = run_oracle("onnxruntime", path, feeds)
    for name in want:
        assert got[name].dtype == want[name].dtype
    parity = compare(got, want, Tolerance(1e-4, 1e-5))
    assert parity.ok, parity.to_json()
