"""The one-quantization-step rule of `references.parity` and the steps the graph gives
(`references.quant_steps`)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from luminal.metering.bench.outputs import DEFAULT_TOLERANCES, check_outputs
from luminal.references.parity import compare
from luminal.references.quant_steps import quantization_steps


def _qdq_model(per_axis: bool = False) -> onnx.ModelProto:
    """x -> QuantizeLinear -> DequantizeLinear -> Reshape -> y (float), and the quantized
    integer as a second output q."""
    scale = np.array([0.1, 0.25, 0.05], np.float32) if per_axis else np.array(0.1, np.float32)
    zero = np.zeros(3, np.uint8) if per_axis else np.array(128, np.uint8)
    inits = [
        numpy_helper.from_array(scale, "s"),
        numpy_helper.from_array(zero, "z"),
        numpy_helper.from_array(np.array([6], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=1),
        helper.make_node("Reshape", ["d", "shape"], ["y"]),
        helper.make_node("Relu", ["d"], ["r"]),
    ]
    graph = helper.make_graph(
        nodes,
        "qdq",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (2, 3))],
        [
            helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (6,)),
            helper.make_tensor_value_info("q", onnx.TensorProto.UINT8, (2, 3)),
            helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, (2, 3)),
        ],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_steps_come_from_the_producing_op() -> None:
    steps = quantization_steps(_qdq_model())
    # y: DequantizeLinear's scale through a Reshape; q: an integer step; r: float math after
    # the dequantize gets none
    assert steps == {"y": np.float32(0.1).item(), "q": 1.0}


def test_a_per_axis_scale_gives_the_coarsest_channel() -> None:
    assert quantization_steps(_qdq_model(per_axis=True))["y"] == np.float32(0.25).item()


def test_one_step_passes_and_two_fail() -> None:
    want = {"y": np.array([0.1, 0.2, 0.3], np.float32)}
    one = {"y": np.array([0.2, 0.2, 0.3], np.float32)}
    two = {"y": np.array([0.3, 0.2, 0.3], np.float32)}
    steps = {"y": 0.1}
    assert not compare(one, want).ok  # without the graph's step: a float mismatch
    assert compare(one, want, steps=steps).ok
    assert not compare(two, want, steps=steps).ok
    assert compare(one, want, steps=steps).outputs[0].tolerance.step == 0.1


def test_integer_outputs_may_be_one_step_apart_only_with_a_step() -> None:
    want = {"q": np.array([0, 128, 255], np.uint8)}
    one = {"q": np.array([1, 127, 255], np.uint8)}
    two = {"q": np.array([2, 128, 255], np.uint8)}
    assert not compare(one, want).ok  # integers are exact
    assert compare(one, want, steps={"q": 1.0}).ok
    assert not compare(two, want, steps={"q": 1.0}).ok  # no wrap-around: 2 - 0 is 2


def test_bench_parity_takes_the_steps() -> None:
    want = {"q": np.array([10, 20], np.uint8), "f": np.array([1.0], np.float32)}
    got = {"q": np.array([11, 20], np.uint8), "f": np.array([1.0], np.float32)}
    strict = check_outputs(got, want, DEFAULT_TOLERANCES)
    stepped = check_outputs(got, want, DEFAULT_TOLERANCES, {"q": 1.0})
    assert [c.ok for c in strict] == [False, True]
    assert [c.ok for c in stepped] == [True, True]
    assert stepped[0].to_json()["step"] == 1.0 and "step" not in stepped[1].to_json()
