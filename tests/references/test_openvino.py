"""The OpenVINO baseline: its outputs against ONNX Runtime's, and what it says it timed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from luminal.errors import UsageError
from luminal.references.baselines import BaselineOptions, open_baseline

pytest.importorskip(
    "openvino", reason="openvino is not installed (pip install 'luminal[openvino]')"
)


@pytest.fixture(scope="module")
def small_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x[4, 32] -> softmax(relu(x @ W1 + b1) @ W2) and the hidden layer: two named outputs."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((32, 64)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.standard_normal((64, 10)).astype(np.float32) / 8, "w2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["hidden"]),
        helper.make_node("MatMul", ["hidden", "w2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 32])],
        [
            helper.make_tensor_value_info("probs", onnx.TensorProto.FLOAT, [4, 10]),
            helper.make_tensor_value_info("hidden", onnx.TensorProto.FLOAT, [4, 64]),
        ],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("openvino") / "small.onnx"
    onnx.save(model, path)
    return path


def test_openvino_matches_onnxruntime_output_by_output(small_onnx: Path) -> None:
    cpu = {"providers": "CPUExecutionProvider"}
    _, ort = open_baseline("onnxruntime", small_onnx, BaselineOptions(1, cpu))
    _, ov = open_baseline("openvino", small_onnx, BaselineOptions(1))
    rng = np.random.default_rng(1)
    for _ in range(3):  # the reused infer request must not hand back a previous call's outputs
        feeds = {"x": rng.standard_normal((4, 32)).astype(np.float32)}
        got, want = ov(feeds), ort(feeds)
        assert list(got) == ["probs", "hidden"]
        for name in want:
            assert got[name].dtype == np.float32 and got[name].shape == want[name].shape
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def test_openvino_says_what_it_compiled(small_onnx: Path) -> None:
    _, ov = open_baseline("openvino", small_onnx, BaselineOptions(2))
    props = ov.info["properties"]
    assert ov.info["device"] == "CPU"
    assert props["PERFORMANCE_HINT"] == "LATENCY"  # type: ignore[index]
    assert props["INFERENCE_NUM_THREADS"] == "2"  # type: ignore[index]
    assert props["INFERENCE_PRECISION_HINT"] == "f32"  # type: ignore[index]


def test_openvino_takes_the_customers_properties(small_onnx: Path) -> None:
    config = {"properties": {"PERFORMANCE_HINT": "THROUGHPUT", "INFERENCE_NUM_THREADS": 1}}
    _, ov = open_baseline("openvino", small_onnx, BaselineOptions(2, {}, config))
    assert ov.info["properties"]["PERFORMANCE_HINT"] == "THROUGHPUT"  # type: ignore[index]
    assert ov.info["properties"]["INFERENCE_NUM_THREADS"] == "1"  # type: ignore[index]
    with pytest.raises(UsageError, match="OpenVINO cannot compile it"):
        open_baseline(
            "openvino", small_onnx, BaselineOptions(1, {}, {"properties": {"NO_SUCH": 1}})
        )
    with pytest.raises(UsageError, match=r"runs \.onnx"):
        open_baseline("openvino", small_onnx.with_suffix(".pt2"), BaselineOptions(1))
