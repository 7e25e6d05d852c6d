"""Build one-node ONNX models in code and compare luminal's lowering with ONNX Runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from luminal.compiler.frontend.onnx import load
from luminal.compiler.ir import interpreter, spec
from luminal.metering.parity import compare
from onnx import helper, numpy_helper

NP_TO_ONNX = {
    np.dtype(np.float32): onnx.TensorProto.FLOAT,
    np.dtype(np.float64): onnx.TensorProto.DOUBLE,
    np.dtype(np.int64): onnx.TensorProto.INT64,
    np.dtype(np.int32): onnx.TensorProto.INT32,
    np.dtype(np.bool_): onnx.TensorProto.BOOL,
}


def node_model(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
    *,
    consts: Sequence[int] = (),
    n_outputs: int = 1,
    opset: int = 18,
) -> onnx.ModelProto:
    """One `op` node.  inputs[i] is fed at run time unless i is in `consts` (an
    initializer then); None leaves an optional input out."""
    names, graph_inputs, inits = [], [], []
    for i, value in enumerate(inputs):
        if value is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        if i in consts:
            inits.append(numpy_helper.from_array(np.asarray(value), name))
        else:
            graph_inputs.append(
                helper.make_tensor_value_info(name, NP_TO_ONNX[value.dtype], value.shape)
            )
    outs = [f"out{k}" for k in range(n_outputs)]
    node = helper.make_node(op, names, outs, name=f"{op.lower()}_node", **(attrs or {}))
    out_info = [helper.make_empty_tensor_value_info(o) for o in outs]
    graph = helper.make_graph([node], f"{op}_test", graph_inputs, out_info, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    return model


def feeds_of(
    model: onnx.ModelProto, inputs: Sequence[np.ndarray | None], consts: Sequence[int]
) -> dict[str, np.ndarray]:
    return {f"in{i}": v for i, v in enumerate(inputs) if v is not None and i not in consts}


def check_against_ort(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    tmp: Path,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> None:
    path = tmp / "model.onnx"
    onnx.save(model, path)
    loaded = load(path)
    spec.check(loaded.graph)
    got = interpreter.run(loaded.graph, feeds)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    want = dict(zip(names, sess.run(names, feeds), strict=True))
    for name in names:
        assert got[name].dtype == want[name].dtype, (name, got[name].dtype, want[name].dtype)
    parity = compare(got, want, rtol, atol)
    assert parity.ok, parity.to_json()
