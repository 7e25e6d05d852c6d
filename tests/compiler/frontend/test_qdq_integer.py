"""QDQ contractions become integer contractions (`frontend.onnx_qdq`): small QDQ models
built in code, checked against ONNX Runtime's int8 run within one quantization step, and
their schedules' contractions over i32."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from luminal.compiler.frontend.onnx import load
from luminal.compiler.frontend.onnx_qdq import integer_contractions
from luminal.compiler.ir import DType, Op, interpreter
from luminal.compiler.schedule import schedule
from luminal.references.oracle import run_oracle
from luminal.references.parity import compare
from luminal.references.quant_steps import quantization_steps
from tests.helpers.compiled import compile_and_run

R = np.random.default_rng(3)
F = onnx.TensorProto.FLOAT


def _c(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(value, name)


def qdq_model(
    op: str, per_channel: bool = False, with_bias: bool = True, unit: bool = True
) -> onnx.ModelProto:
    """x -> Q -> DQ -> op(., DQ(w_q) [, DQ(bias_q)]) -> Q -> DQ -> y, as quantize_static
    writes it; op is Conv (3x3, pad 1), MatMul or Gemm (transB).  Not a `unit`: a float
    bias and no Q after (the op's float output is y)."""
    if op == "Conv":
        xshape, wshape, n = (1, 3, 6, 6), (4, 3, 3, 3), 4
    elif op == "MatMul":
        xshape, wshape, n = (2, 5, 8), (8, 6), 6
    else:
        xshape, wshape, n = (3, 8), (6, 8), 6
    w_q = R.integers(-127, 128, wshape).astype(np.int8)
    w_s = (R.uniform(0.005, 0.02, n) if per_channel else np.array(0.01)).astype(np.float32)
    w_z = np.zeros(n if per_channel else (), np.int8)
    inits = [
        _c("xs", np.array(0.03, np.float32)),
        _c("xz", np.array(128, np.uint8)),
        _c("wq", w_q),
        _c("ws", w_s),
        _c("wz", w_z),
        _c("ys", np.array(0.05, np.float32)),
        _c("yz", np.array(120, np.uint8)),
        _c("bias", R.uniform(-0.5, 0.5, n).astype(np.float32)),
        _c("bq", R.integers(-2000, 2000, n).astype(np.int32)),
        _c("bs", (np.float32(0.03) * w_s).astype(np.float32)),
        _c("bz", np.zeros(n if per_channel else (), np.int32)),
    ]
    axis = {"Conv": 0, "MatMul": 1, "Gemm": 0}[op]
    bias = "bd" if unit else "bias"
    inputs = ["xd", "wd", bias] if with_bias and op != "MatMul" else ["xd", "wd"]
    attrs = {"pads": [1, 1, 1, 1]} if op == "Conv" else {"transB": 1} if op == "Gemm" else {}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=axis),
        helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], axis=0),
        helper.make_node(op, inputs, ["acc" if unit else "y"], name="contraction", **attrs),
    ]
    if unit:
        nodes.append(helper.make_node("QuantizeLinear", ["acc", "ys", "yz"], ["yq"]))
        nodes.append(helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]))
    graph = helper.make_graph(
        nodes,
        f"qdq_{op}",
        [helper.make_tensor_value_info("x", F, xshape)],
        [helper.make_tensor_value_info("y", F, None)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


CASES = [
    (op, per_channel, bias)
    for op in ("Conv", "MatMul", "Gemm")
    for per_channel in (False, True)
    for bias in ((True, False) if op != "MatMul" else (False,))
]


@pytest.mark.parametrize(("op", "per_channel", "bias"), CASES)
def test_qdq_unit_is_the_qlinear_op_and_equals_ort(op, per_channel, bias, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """DQ -> op -> Q becomes the QLinear op ORT fuses it into, computed as ORT's kernel
    computes it: the same integers, not just within a step."""
    model = qdq_model(op, per_channel, bias)
    fused = {"Conv": "QLinearConv", "MatMul": "QLinearMatMul", "Gemm": "QGemm"}[op]
    assert fused in [n.op_type for n in integer_contractions(model).graph.node]
    got, want = _run_both(model, tmp_path)
    parity = compare(got, want, steps=quantization_steps(model))
    assert parity.ok and parity.max_abs == 0.0, parity.to_json()


@pytest.mark.parametrize(("op", "per_channel", "bias"), CASES)
def test_qdq_contraction_without_requantize_is_integer(op, per_channel, bias, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """No Q after: ConvInteger / MatMulInteger and one float scale, as close to ORT's
    float result as f32 rounding allows."""
    model = qdq_model(op, per_channel, bias, unit=False)
    ops = [n.op_type for n in integer_contractions(model).graph.node]
    assert ("ConvInteger" if op == "Conv" else "MatMulInteger") in ops
    got, want = _run_both(model, tmp_path)
    assert compare(got, want).ok, compare(got, want).to_json()


def _run_both(model: onnx.ModelProto, tmp_path) -> tuple[dict, dict]:  # type: ignore[no-untyped-def,type-arg]
    """The reference interpreter's outputs (its contraction SUMs all i32) and ORT's."""
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = load(path)
    sums = [n.dtype for n in loaded.graph.nodes if n.op is Op.SUM]
    assert sums and all(d is DType.I32 for d in sums), sums
    shape = loaded.graph.nodes[loaded.graph.inputs[0][1]].shape
    x = {"x": R.uniform(-3, 3, shape).astype(np.float32)}
    return interpreter.run(loaded.graph, x), run_oracle("onnxruntime", path, x)


def test_compiled_qdq_conv_runs_an_i32_contraction_kernel(tmp_path) -> None:
    model = qdq_model("Conv", per_channel=True)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = load(path)
    sched = schedule(loaded.graph)
    kinds = [
        (k.kind, sched.graph.nodes[k.reduction if k.reduction is not None else k.node].dtype)
        for k in sched.kernels
    ]
    assert ("contraction", DType.I32) in kinds, kinds
    x = {"x": R.uniform(-3, 3, (1, 3, 6, 6)).astype(np.float32)}
    got = compile_and_run(loaded.graph, x, tmp_path)
    want = run_oracle("onnxruntime", path, x)
    parity = compare(got, want, steps=quantization_steps(model))
    assert parity.ok, parity.to_json()


def test_a_float_activation_scale_it_cannot_see_is_left_alone() -> None:
    model = qdq_model("MatMul")
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "xs"))
    model.graph.input.append(helper.make_tensor_value_info("xs", F, ()))
    assert integer_contractions(model) is model
