"""Every ONNX op the frontend lowers, one node at a time, against ONNX Runtime."""

from __future__ import annotations

import pytest

from tests.helpers.onnx_cases import CASES, check_against_ort, feeds_of, node_model


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "consts", "extra"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_op_matches_onnxruntime(op, inputs, attrs, consts, extra, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = node_model(op, inputs, attrs, consts=consts, **extra)
    check_against_ort(model, feeds_of(model, inputs, consts), tmp_path)


def test_every_required_op_is_lowered() -> None:
    from luminal.compiler.frontend.onnx_ops import OPS

    required = (
        "Add Sub Mul Div Pow Sqrt Exp Log Tanh Sigmoid Relu LeakyRelu Gelu Erf Softmax LogSoftmax "
        "MatMul Gemm Conv BatchNormalization LayerNormalization MaxPool AveragePool "
        "GlobalAveragePool Reshape Transpose Flatten Squeeze Unsqueeze Concat Split Slice Gather "
        "Expand Where Equal Less Greater Not And Cast Shape ConstantOfShape Constant Identity "
        "ReduceMean ReduceSum ReduceMax Clip Pad Min Max Neg Abs Reciprocal Dropout Range Trilu Einsum"
    ).split()
    assert [op for op in required if op not in OPS] == []
    tested = {c[1] for c in CASES} | {"Constant"}
    assert [op for op in required if op not in tested] == []
