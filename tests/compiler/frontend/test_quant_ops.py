"""ONNX Runtime's quantized ops (com.microsoft) and DynamicQuantizeLinear, one node at a
time, on the reference interpreter against ONNX Runtime, within one quantization step."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from luminal.compiler.frontend.onnx import load
from luminal.compiler.ir import interpreter, spec
from luminal.references.oracle import run_oracle
from luminal.references.parity import compare
from luminal.references.quant_steps import quantization_steps
from tests.helpers.onnx_cases import NP_TO_ONNX

R = np.random.default_rng(7)


def u8(*shape: int) -> np.ndarray:
    return R.integers(0, 256, shape).astype(np.uint8)


def s(v: float) -> np.ndarray:
    return np.array(v, np.float32)


def z(v: int, dtype: Any = np.uint8) -> np.ndarray:
    return np.array(v, dtype)


def ms_model(
    op: str,
    inputs: list[np.ndarray | None],
    attrs: dict[str, Any],
    fed: tuple[int, ...],
    out_shape: tuple[int, ...],
) -> onnx.ModelProto:
    """One com.microsoft `op` node; inputs at positions `fed` are graph inputs, the rest
    initializers (None: an optional input left out).  ONNX's shape inference does not know
    the domain, so the output's shape is given."""
    names, graph_inputs, inits = [], [], []
    for i, value in enumerate(inputs):
        if value is None:
            names.append("")
            continue
        names.append(f"in{i}")
        if i in fed:
            graph_inputs.append(
                helper.make_tensor_value_info(f"in{i}", NP_TO_ONNX[value.dtype], value.shape)
            )
        else:
            inits.append(numpy_helper.from_array(value, f"in{i}"))
    node = helper.make_node(op, names, ["out0"], domain="com.microsoft", **attrs)
    float_out = op == "QGemm" and len(inputs) < 8  # QGemm without y_scale: float
    elem = onnx.TensorProto.FLOAT if float_out else NP_TO_ONNX[inputs[fed[0]].dtype]  # type: ignore[union-attr]
    out = helper.make_tensor_value_info("out0", elem, out_shape)
    graph = helper.make_graph([node], op, graph_inputs, [out], initializer=inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


# fmt: off
CASES = [
    ("qlinear-add", "QLinearAdd", [u8(2, 3, 4), s(0.05), z(120), u8(2, 3, 4), s(0.03), z(100), s(0.07), z(110)], {}, (0, 3)),
    ("qlinear-add-broadcast", "QLinearAdd", [u8(2, 3, 4), s(0.05), z(120), u8(4), s(0.03), z(100), s(0.07), z(110)], {}, (0, 3)),
    ("qlinear-mul", "QLinearMul", [u8(3, 5), s(0.02), z(128), u8(3, 5), s(0.04), z(90), s(0.3), z(128)], {}, (0, 3)),
    ("qlinear-mul-int8", "QLinearMul", [u8(3, 5).view(np.int8), s(0.02), z(0, np.int8), u8(3, 5).view(np.int8), s(0.04), z(3, np.int8), s(0.5), z(-2, np.int8)], {}, (0, 3)),
    ("qlinear-gap", "QLinearGlobalAveragePool", [u8(2, 3, 5, 5), s(0.1), z(128), s(0.02), z(100)], {}, (0,)),
    ("qlinear-gap-nhwc", "QLinearGlobalAveragePool", [u8(2, 4, 4, 3), s(0.1), z(128), s(0.02), z(100)], {"channels_last": 1}, (0,)),
    ("qlinear-softmax", "QLinearSoftmax", [u8(2, 3, 16), s(0.08), z(128), s(1 / 256), z(0)], {"axis": -1, "opset": 13}, (0,)),
    ("qlinear-sigmoid", "QLinearSigmoid", [u8(3, 7), s(0.05), z(128), s(1 / 256), z(0)], {}, (0,)),
    ("qlinear-leaky-relu", "QLinearLeakyRelu", [u8(3, 7), s(0.05), z(128), s(0.04), z(60)], {"alpha": 0.1}, (0,)),
    ("qlinear-concat", "QLinearConcat", [s(0.05), z(100), u8(2, 3), s(0.04), z(120), u8(2, 5), s(0.06), z(90)], {"axis": 1}, (2, 5)),
    ("qgemm-float-out", "QGemm", [u8(4, 6), s(0.02), z(128), u8(6, 5).view(np.int8), s(0.01), z(0, np.int8), R.integers(-500, 500, (5,)).astype(np.int32)], {}, (0,)),
    ("qgemm-requant-transb", "QGemm", [u8(4, 6), s(0.02), z(128), u8(5, 6).view(np.int8), np.full(5, 0.01, np.float32) * np.arange(1, 6, dtype=np.float32), np.zeros(5, np.int8), R.integers(-500, 500, (5,)).astype(np.int32), s(0.15), z(120)], {"transB": 1}, (0,)),
]
# fmt: on


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "fed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_ms_op_matches_onnxruntime_within_one_step(op, inputs, attrs, fed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "model.onnx"
    feeds = {f"in{i}": inputs[i] for i in fed}
    onnx.save(ms_model(op, inputs, attrs, fed, ()), path)  # ORT does not check it
    want = run_oracle("onnxruntime", path, feeds)
    model = ms_model(op, inputs, attrs, fed, want["out0"].shape)
    onnx.save(model, path)
    loaded = load(path)
    spec.check(loaded.graph)
    got = interpreter.run(loaded.graph, feeds)
    assert got["out0"].dtype == want["out0"].dtype
    parity = compare(got, want, steps=quantization_steps(model))
    assert parity.ok, parity.to_json()
    if want["out0"].dtype.kind in "ui":  # mostly exact: a step only at rounding ties
        off = np.abs(got["out0"].astype(np.int64) - want["out0"].astype(np.int64))
        assert np.count_nonzero(off) <= max(2, off.size // 20), off


def test_dynamic_quantize_linear_matches_onnxruntime_exactly(tmp_path) -> None:
    x = R.uniform(-2.0, 5.0, (4, 33)).astype(np.float32)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero"])
    types = (onnx.TensorProto.UINT8, onnx.TensorProto.FLOAT, onnx.TensorProto.UINT8)
    outs = [
        helper.make_tensor_value_info(n, t, sh)
        for n, t, sh in zip(("y", "scale", "zero"), types, (x.shape, (), ()), strict=True)
    ]
    graph = helper.make_graph(
        [node], "dql", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)], outs
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    got = interpreter.run(load(path).graph, {"x": x})
    want = run_oracle("onnxruntime", path, {"x": x})
    for name in ("y", "scale", "zero"):
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_array_equal(got[name], want[name].reshape(got[name].shape), name)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_binary_ms_op_equals_onnxruntime_over_every_input_pair(op, dtype, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every (a, b) pair of 8-bit values under several scales: bit for bit, no step.  A
    scale ratio per input (a_s/c_s, b_s/c_s) instead of ORT's ((a - a_zp) a_s +
    (b - b_zp) b_s) / c_s put 1 in 200,000 outputs of a ResNet-18's residual add one step
    off, and the error grew through the layers."""
    info = np.iinfo(dtype)
    grid = np.arange(info.min, info.max + 1).astype(dtype)
    a, b = np.meshgrid(grid, grid, indexing="ij")
    rng = np.random.default_rng(11)
    for _ in range(3):
        sa, sb, sc = (s(float(v)) for v in rng.uniform(0.005, 0.2, 3))
        za, zb, zc = (z(int(v), dtype) for v in rng.integers(info.min // 2, info.max // 2, 3))
        inputs = [a, sa, za, b, sb, zb, sc, zc]
        path = tmp_path / "model.onnx"
        model = ms_model(op, inputs, {}, (0, 3), a.shape)
        onnx.save(model, path)
        feeds = {"in0": a, "in3": b}
        want = run_oracle("onnxruntime", path, feeds)["out0"]
        got = interpreter.run(load(path).graph, feeds)["out0"]
        off = np.flatnonzero(got != want)
        scales = (sa, sb, sc, za, zb, zc)
        assert off.size == 0, (op, scales, off.size, a.flat[off[:3]], b.flat[off[:3]])
