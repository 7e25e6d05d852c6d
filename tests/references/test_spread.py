"""The reference's spread (`references.spread`) and the parity rule that adds it to a
quantized output's bound (`references.parity`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from luminal.compiler.frontend.onnx import load
from luminal.compiler.ir import interpreter
from luminal.metering.bench.outputs import DEFAULT_TOLERANCES, check_outputs
from luminal.references.parity import compare
from luminal.references.quant_steps import is_quantized, quantization_steps
from luminal.references.spread import reference_spread

K = 256


def _qdq_chain(layers: int = 3, seed: int = 0) -> onnx.ModelProto:
    """x -> (Q -> DQ -> MatMul by a DQ'd int8 weight) x layers -> Q -> DQ -> out: units
    ONNX Runtime's optimizer fuses into integer QLinearMatMuls, and runs in float without
    it."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(np.array(0.02, np.float32), "sx"),
        numpy_helper.from_array(np.array(0, np.int8), "zx"),
        numpy_helper.from_array(np.array(0.001, np.float32), "sw"),
    ]
    nodes, cur = [], "x"
    for n in range(layers):
        w = rng.integers(-127, 128, (K, K)).astype(np.int8)
        inits.append(numpy_helper.from_array(w, f"w{n}"))
        nodes += [
            helper.make_node("QuantizeLinear", [cur, "sx", "zx"], [f"q{n}"]),
            helper.make_node("DequantizeLinear", [f"q{n}", "sx", "zx"], [f"d{n}"]),
            helper.make_node("DequantizeLinear", [f"w{n}", "sw", "zx"], [f"dw{n}"]),
            helper.make_node("MatMul", [f"d{n}", f"dw{n}"], [f"y{n}"]),
        ]
        cur = f"y{n}"
    nodes += [
        helper.make_node("QuantizeLinear", [cur, "sx", "zx"], ["qo"]),
        helper.make_node("DequantizeLinear", ["qo", "sx", "zx"], ["out"]),
    ]
    shape = (64, K)
    graph = helper.make_graph(
        nodes,
        "qdq-chain",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, shape)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _feeds() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(1).standard_normal((64, K)).astype(np.float32)}


def _ort(path: Path, level: ort.GraphOptimizationLevel) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, _feeds())[0]


def test_the_spread_is_ort_against_itself_on_a_quantized_model(tmp_path: Path) -> None:
    path = tmp_path / "chain.onnx"
    onnx.save(_qdq_chain(), path)
    fused = _ort(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    plain = _ort(path, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    spread = reference_spread(path, _feeds())
    assert spread == {"out": float(np.abs(fused.astype(np.float64) - plain).max())}
    assert spread["out"] > 0  # ORT disagrees with itself here, by a step or more


def test_a_float_model_has_no_spread(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (2, 3))
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (2, 3))
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "f", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    assert not is_quantized(model)
    assert reference_spread(path, {"x": np.ones((2, 3), np.float32)}) == {}
    assert reference_spread(tmp_path / "program.pt2", {}) == {}


def test_the_spread_widens_the_bound_by_exactly_itself() -> None:
    want = {"y": np.array([0.1, 0.2, 0.3], np.float32)}
    three = {"y": np.array([0.4, 0.2, 0.3], np.float32)}  # three steps of 0.1 off
    steps = {"y": 0.1}
    assert not compare(three, want, steps=steps).ok
    assert not compare(three, want, steps=steps, spreads={"y": 0.1}).ok
    wide = compare(three, want, steps=steps, spreads={"y": 0.2})
    assert wide.ok and wide.outputs[0].tolerance.allowance == 0.1 + 0.2
    assert wide.outputs[0].to_json()["spread"] == 0.2


def test_integer_outputs_and_bench_checks_take_the_spread() -> None:
    want = {"q": np.array([10, 20], np.int8)}
    got = {"q": np.array([13, 20], np.int8)}
    assert not check_outputs(got, want, DEFAULT_TOLERANCES, {"q": 1.0})[0].ok
    (check,) = check_outputs(got, want, DEFAULT_TOLERANCES, {"q": 1.0}, {"q": 2.0})
    assert check.ok and check.to_json()["spread"] == 2.0


def test_the_exact_integer_chain_is_within_the_rule_against_ort(tmp_path: Path) -> None:
    """luminal computes every unit of the chain as exact integers (the QDQ rewrite); ORT
    fuses some and rounds the rest through float.  The rule holds luminal to one step plus
    ORT's own spread, and no looser: a result off by more than that fails."""
    path = tmp_path / "chain.onnx"
    model = _qdq_chain()
    onnx.save(model, path)
    want = {"out": _ort(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)}
    got = interpreter.run(load(path).graph, _feeds())
    steps, spreads = quantization_steps(model), reference_spread(path, _feeds())
    assert compare(got, want, steps=steps, spreads=spreads).ok
    shifted = {"out": got["out"] + np.float32(steps["out"] + spreads["out"] + 1e-3)}
    assert not compare(shifted, want, steps=steps, spreads=spreads).ok
