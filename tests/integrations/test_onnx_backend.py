"""The ONNX Backend API (`luminal.integrations.onnx_backend`); the conformance suite that
drives it is tested in tests/tools/test_conformance.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from luminal.errors import UnsupportedOp, UsageError
from luminal.integrations import onnx_backend as backend
from tests.helpers.onnx_cases import node_model


def _model(nodes, inputs, outputs, opset: int = 18, inits=()):  # type: ignore[no-untyped-def]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _f(name: str, shape):  # type: ignore[no-untyped-def]
    return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)


def test_prepare_and_run_positional_and_by_name() -> None:
    model = _model(
        [helper.make_node("Add", ["x", "y"], ["z"]), helper.make_node("Relu", ["z"], ["r"])],
        [_f("x", [2, 3]), _f("y", [3])],
        [_f("r", [2, 3])],
    )
    rep = backend.prepare(model, "CPU")
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    y = np.array([1, -1, 0.5], np.float32)
    (out,) = rep.run([x, y])
    np.testing.assert_array_equal(out, np.maximum(x + y, 0))
    named = rep.run({"x": x, "y": y})
    np.testing.assert_array_equal(named["r"], out)
    with pytest.raises(UsageError, match="dtype"):
        rep.run([x.astype(np.float64), y])


def test_run_node_and_run_model() -> None:
    node = helper.make_node("Mul", ["a", "b"], ["c"])
    a, b = np.full((2, 2), 3, np.float32), np.full((2, 2), 2, np.float32)
    (c,) = backend.run_node(node, [a, b])
    np.testing.assert_array_equal(c, a * b)
    model = _model([node], [_f("a", [2, 2]), _f("b", [2, 2])], [_f("c", [2, 2])])
    np.testing.assert_array_equal(backend.run_model(model, [a, b])[0], a * b)


def test_devices() -> None:
    assert backend.supports_device("CPU")
    assert not backend.supports_device("CUDA")
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_f("x", [2])], [_f("y", [2])])
    with pytest.raises(UsageError, match="CUDA"):
        backend.prepare(model, "CUDA")


def test_shape_inputs_are_specialized_once_per_value() -> None:
    """A Reshape whose target shape is fed at run time compiles once per distinct shape."""
    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [_f("x", [2, 6]), helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["rows", "cols"])],
    )
    rep = backend.prepare(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for shape in ([3, 4], [4, 3], [3, 4]):
        (y,) = rep.run([x, np.array(shape, np.int64)])
        np.testing.assert_array_equal(y, x.reshape(shape))
    assert rep.static == {"s"} and len(rep._sessions) == 2


def test_symbolic_dims_bind_to_the_fed_shape() -> None:
    x_info = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])
    model = _model([helper.make_node("Neg", ["x"], ["y"])], [x_info], [_f("y", ["batch", 4])])
    rep = backend.prepare(model)
    for n in (1, 3):
        x = np.ones((n, 4), np.float32)
        np.testing.assert_array_equal(rep.run([x])[0], -x)


def test_unsupported_op_fails_cleanly_at_prepare() -> None:
    model = node_model("NonZero", [np.ones((2, 3), np.float32)])
    with pytest.raises(UnsupportedOp, match="NonZero"):
        backend.prepare(model)


def test_sequence_inputs_are_refused_by_name() -> None:
    seq = helper.make_tensor_sequence_value_info("s", onnx.TensorProto.FLOAT, [2])
    model = _model(
        [helper.make_node("SequenceLength", ["s"], ["n"])],
        [seq],
        [helper.make_tensor_value_info("n", onnx.TensorProto.INT64, [])],
    )
    with pytest.raises(UnsupportedOp, match="sequence"):
        backend.prepare(model)


def test_old_opsets_are_upgraded_by_the_version_converter() -> None:
    w = numpy_helper.from_array(np.ones((3,), np.float32), "w")
    model = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [_f("x", [2, 3])], [_f("y", [2, 3])], 6, [w]
    )
    (y,) = backend.prepare(model).run([np.zeros((2, 3), np.float32)])
    np.testing.assert_array_equal(y, np.ones((2, 3), np.float32))
