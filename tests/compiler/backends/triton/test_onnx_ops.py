"""Every ONNX op case of the CPU backend's suite (tests/helpers/onnx_cases*.py), lowered
by the frontend, generated as Triton and run in Triton's interpreter, against the
reference interpreter.  Cases the reference itself refuses are the frontend's business."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np
import onnx
import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from luminal.compiler.frontend.onnx import load
from luminal.compiler.ir import interpreter
from luminal.errors import LuminalError
from tests.compiler.backends.triton.tritontest import assert_matches, backend_with, load_interpreted
from tests.helpers.onnx_cases import CASES, feeds_of, node_model


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "consts", "extra"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_onnx_op_matches_the_reference(op, inputs, attrs, consts, extra, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = node_model(op, inputs, attrs, consts=consts, **extra)
    onnx.save(model, tmp_path / "model.onnx")
    feeds = feeds_of(model, inputs, consts)
    try:
        graph = load(tmp_path / "model.onnx").graph
        with np.errstate(all="ignore"):
            want = interpreter.run(graph, feeds)
    except LuminalError as err:
        pytest.skip(f"not lowered or not defined for these inputs: {err}")
    exe, _ = load_interpreted(backend_with("cuda"), graph)
    assert_matches(exe.run(feeds), want)
