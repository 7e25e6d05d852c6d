"""Build one-node ONNX models in code and compare luminal's lowering with ONNX Runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from luminal.compiler.frontend.onnx import load
from luminal.compiler.ir import interpreter, spec
from luminal.references.oracle import run_oracle
from luminal.references.parity import Tolerance, compare

NP_TO_ONNX = {
    np.dtype(np.float32): onnx.TensorProto.FLOAT,
    np.dtype(np.float64): onnx.TensorProto.DOUBLE,
    np.dtype(np.int64): onnx.TensorProto.INT64,
    np.dtype(np.int32): onnx.TensorProto.INT32,
    np.dtype(np.bool_): onnx.TensorProto.BOOL,
    np.dtype(np.float16): onnx.TensorProto.FLOAT16,
    np.dtype(np.int16): onnx.TensorProto.INT16,
    np.dtype(np.int8): onnx.TensorProto.INT8,
    np.dtype(np.uint8): onnx.TensorProto.UINT8,
    np.dtype(np.uint16): onnx.TensorProto.UINT16,
    np.dtype(np.uint32): onnx.TensorProto.UINT32,
    np.dtype(np.uint64): onnx.TensorProto.UINT64,
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


def chain_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    consts: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
) -> onnx.ModelProto:
    """A graph of several nodes: `inputs` fed at run time (by name, shaped as the arrays),
    `consts` as initializers, `outputs` shaped by inference."""
    graph = helper.make_graph(
        list(nodes),
        "chain_test",
        [
            helper.make_tensor_value_info(name, NP_TO_ONNX[a.dtype], a.shape)
            for name, a in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=[
            numpy_helper.from_array(np.asarray(a), name) for name, a in (consts or {}).items()
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


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
    want = run_oracle("onnxruntime", path, feeds)
    for name in want:
        assert got[name].dtype == want[name].dtype, (name, got[name].dtype, want[name].dtype)
    parity = compare(got, want, Tolerance(rtol, atol))
    assert parity.ok, parity.to_json()


# ---- the op table: every case runs on the reference interpreter and compiled ----

R = np.random.default_rng(0)


def f(*shape: int, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    return R.uniform(lo, hi, shape).astype(np.float32)


def pos(*shape: int) -> np.ndarray:
    return R.uniform(0.1, 4.0, shape).astype(np.float32)


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def ints(*shape: int, lo: int = -20, hi: int = 20) -> np.ndarray:
    return R.integers(lo, hi, shape).astype(np.int64)


def bools(*shape: int) -> np.ndarray:
    return R.random(shape) < 0.5


# (id, op, inputs, attrs, const input indices, extra kwargs)
CASES: list[tuple[str, str, list[Any], dict[str, Any], tuple[int, ...], dict[str, Any]]] = [
    ("add-broadcast", "Add", [f(2, 3, 4), f(3, 1)], {}, (), {}),
    ("sub", "Sub", [f(2, 3), f(2, 3)], {}, (), {}),
    ("mul-scalar", "Mul", [f(4, 5), f()], {}, (), {}),
    ("div", "Div", [f(3, 4), pos(3, 4)], {}, (), {}),
    ("div-int", "Div", [ints(3, 4), ints(3, 4, lo=1, hi=7)], {}, (), {}),
    ("pow-square", "Pow", [f(3, 4), np.array(2.0, np.float32)], {}, (1,), {}),
    ("pow-cube-neg", "Pow", [f(3, 4), np.array(3.0, np.float32)], {}, (1,), {}),
    ("pow-general", "Pow", [pos(3, 4), f(3, 4, lo=-2, hi=2)], {}, (), {}),
    ("sqrt", "Sqrt", [pos(5, 6)], {}, (), {}),
    ("exp", "Exp", [f(5, 6, lo=-20, hi=20)], {}, (), {}),
    ("log", "Log", [pos(5, 6)], {}, (), {}),
    ("tanh", "Tanh", [f(5, 6, lo=-12, hi=12)], {}, (), {}),
    ("sigmoid", "Sigmoid", [f(5, 6, lo=-30, hi=30)], {}, (), {}),
    ("relu", "Relu", [f(5, 6)], {}, (), {}),
    ("leaky-relu", "LeakyRelu", [f(5, 6)], {"alpha": 0.2}, (), {}),
    ("gelu", "Gelu", [f(5, 6, lo=-6, hi=6)], {}, (), {"opset": 20}),
    ("gelu-tanh", "Gelu", [f(5, 6, lo=-6, hi=6)], {"approximate": "tanh"}, (), {"opset": 20}),
    ("erf", "Erf", [f(5, 6)], {}, (), {}),
    ("softmax", "Softmax", [f(2, 3, 7)], {"axis": 1}, (), {}),
    ("softmax-opset11", "Softmax", [f(2, 3, 7)], {"axis": 1}, (), {"opset": 11}),
    ("log-softmax", "LogSoftmax", [f(2, 7)], {}, (), {}),
    ("matmul", "MatMul", [f(2, 3, 4, 5), f(5, 6)], {}, (), {}),
    ("matmul-vec", "MatMul", [f(5), f(2, 5, 3)], {}, (), {}),
    (
        "gemm",
        "Gemm",
        [f(4, 3), f(5, 3), f(5)],
        {"transB": 1, "alpha": 0.5, "beta": 2.0},
        (1, 2),
        {},
    ),
    ("gemm-transA", "Gemm", [f(3, 4), f(3, 5)], {"transA": 1}, (), {}),
    ("conv", "Conv", [f(1, 3, 9, 9), f(4, 3, 3, 3), f(4)], {"pads": [1, 1, 1, 1]}, (1, 2), {}),
    (
        "conv-stride-dilate",
        "Conv",
        [f(2, 4, 11, 10), f(6, 2, 3, 2)],
        {"strides": [2, 1], "dilations": [2, 1], "group": 2},
        (1,),
        {},
    ),
    (
        "conv-same",
        "Conv",
        [f(1, 2, 7, 7), f(3, 2, 4, 4)],
        {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
        (1,),
        {},
    ),
    ("conv-1d", "Conv", [f(1, 2, 12), f(3, 2, 5)], {"pads": [2, 1]}, (1,), {}),
    (
        "conv-depthwise",
        "Conv",
        [f(1, 4, 6, 6), f(4, 1, 3, 3)],
        {"group": 4, "pads": [1, 1, 1, 1]},
        (1,),
        {},
    ),
    (
        "batchnorm",
        "BatchNormalization",
        [f(2, 3, 4, 4), pos(3), f(3), f(3), pos(3)],
        {"epsilon": 1e-3},
        (1, 2, 3, 4),
        {},
    ),
    ("layernorm", "LayerNormalization", [f(2, 5, 8), pos(8), f(8)], {"epsilon": 1e-5}, (1, 2), {}),
    ("layernorm-axis", "LayerNormalization", [f(2, 5, 8), pos(5, 8)], {"axis": 1}, (1,), {}),
    (
        "maxpool",
        "MaxPool",
        [f(1, 2, 9, 9)],
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        (),
        {},
    ),
    (
        "maxpool-ceil",
        "MaxPool",
        [f(1, 2, 8, 8)],
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
        (),
        {},
    ),
    (
        "maxpool-dilate",
        "MaxPool",
        [f(1, 1, 9, 9)],
        {"kernel_shape": [2, 2], "dilations": [2, 2]},
        (),
        {},
    ),
    (
        "avgpool",
        "AveragePool",
        [f(1, 2, 8, 8)],
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        (),
        {},
    ),
    (
        "avgpool-include",
        "AveragePool",
        [f(1, 2, 8, 8)],
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
        (),
        {},
    ),
    (
        "avgpool-ceil",
        "AveragePool",
        [f(1, 1, 7, 7)],
        {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
        (),
        {},
    ),
    ("global-avgpool", "GlobalAveragePool", [f(2, 3, 5, 4)], {}, (), {}),
    ("reshape", "Reshape", [f(2, 3, 4), i64(0, -1, 2)], {}, (1,), {}),
    ("transpose", "Transpose", [f(2, 3, 4)], {"perm": [2, 0, 1]}, (), {}),
    ("transpose-default", "Transpose", [f(2, 3, 4)], {}, (), {}),
    ("flatten", "Flatten", [f(2, 3, 4, 5)], {"axis": 2}, (), {}),
    ("squeeze", "Squeeze", [f(1, 3, 1, 4), i64(0, 2)], {}, (1,), {}),
    ("squeeze-all", "Squeeze", [f(1, 3, 1, 4)], {}, (), {}),
    ("unsqueeze", "Unsqueeze", [f(3, 4), i64(0, -1)], {}, (1,), {}),
    ("concat", "Concat", [f(2, 3), f(2, 5), f(2, 1)], {"axis": 1}, (), {}),
    ("concat-int", "Concat", [ints(2, 2), ints(1, 2)], {"axis": 0}, (), {}),
    (
        "slice",
        "Slice",
        [f(6, 8), i64(1, -6), i64(5, 100), i64(0, 1), i64(2, 3)],
        {},
        (1, 2, 3, 4),
        {},
    ),
    (
        "slice-negative-step",
        "Slice",
        [f(6, 8), i64(-1), i64(-100), i64(1), i64(-2)],
        {},
        (1, 2, 3, 4),
        {},
    ),
    ("gather", "Gather", [f(5, 4), np.array([[0, 4], [-1, 2]], np.int64)], {"axis": 0}, (1,), {}),
    (
        "gather-runtime-idx",
        "Gather",
        [f(5, 4), np.array([3, -2, 0], np.int64)],
        {"axis": 1},
        (),
        {},
    ),
    ("gather-scalar", "Gather", [f(5, 4), np.array(2, np.int64)], {"axis": 0}, (1,), {}),
    ("expand", "Expand", [f(3, 1), i64(2, 1, 4)], {}, (1,), {}),
    ("where", "Where", [bools(3, 4), f(3, 4), f(1, 4)], {}, (), {}),
    ("equal", "Equal", [ints(3, 4, lo=0, hi=3), ints(3, 4, lo=0, hi=3)], {}, (), {}),
    ("less", "Less", [f(3, 4), f(3, 4)], {}, (), {}),
    ("greater", "Greater", [f(3, 4), f(4)], {}, (), {}),
    ("less-or-equal", "LessOrEqual", [ints(3, 4, lo=0, hi=3), ints(3, 4, lo=0, hi=3)], {}, (), {}),
    ("not", "Not", [bools(3, 4)], {}, (), {}),
    ("and", "And", [bools(3, 4), bools(3, 4)], {}, (), {}),
    ("or", "Or", [bools(3, 4), bools(4)], {}, (), {}),
    ("xor", "Xor", [bools(3, 4), bools(3, 4)], {}, (), {}),
    ("cast-f2i", "Cast", [f(3, 4, lo=-9, hi=9)], {"to": 7}, (), {}),
    ("cast-i2f", "Cast", [ints(3, 4)], {"to": 1}, (), {}),
    ("cast-f2bool", "Cast", [np.array([0.0, 1.5, -0.0, -2.0], np.float32)], {"to": 9}, (), {}),
    ("shape", "Shape", [f(2, 3, 4)], {}, (), {}),
    ("shape-slice", "Shape", [f(2, 3, 4)], {"start": 1}, (), {"opset": 15}),
    ("constant-of-shape", "ConstantOfShape", [i64(2, 3)], {}, (0,), {}),
    ("identity", "Identity", [f(3)], {}, (), {}),
    ("reduce-mean", "ReduceMean", [f(2, 3, 4), i64(1, -1)], {}, (1,), {}),
    (
        "reduce-mean-opset13",
        "ReduceMean",
        [f(2, 3, 4)],
        {"axes": [1], "keepdims": 0},
        (),
        {"opset": 13},
    ),
    ("reduce-sum", "ReduceSum", [f(2, 3, 4), i64(0)], {"keepdims": 0}, (1,), {}),
    ("reduce-sum-all", "ReduceSum", [f(2, 3, 4)], {}, (), {}),
    ("reduce-max", "ReduceMax", [f(2, 3, 4), i64(2)], {}, (1,), {}),
    ("reduce-min", "ReduceMin", [f(2, 3, 4), i64(2)], {}, (1,), {}),
    ("reduce-l2", "ReduceL2", [f(2, 3, 4), i64(2)], {}, (1,), {}),
    ("reduce-logsumexp", "ReduceLogSumExp", [f(2, 3, 4), i64(1)], {"keepdims": 0}, (1,), {}),
    (
        "clip",
        "Clip",
        [f(3, 4), np.array(-1.0, np.float32), np.array(0.5, np.float32)],
        {},
        (1, 2),
        {},
    ),
    ("clip-min-only", "Clip", [f(3, 4), np.array(-1.0, np.float32)], {}, (1,), {}),
    ("pad", "Pad", [f(2, 3), i64(1, 0, 0, 2), np.array(1.5, np.float32)], {}, (1, 2), {}),
    ("pad-negative", "Pad", [f(4, 5), i64(-1, 1, 0, -2)], {}, (1,), {}),
    ("min", "Min", [f(3, 4), f(4), f(3, 1)], {}, (), {}),
    ("max", "Max", [f(3, 4), f(4)], {}, (), {}),
    ("neg", "Neg", [f(3, 4)], {}, (), {}),
    ("neg-int", "Neg", [ints(3, 4)], {}, (), {}),
    ("abs", "Abs", [f(3, 4)], {}, (), {}),
    ("reciprocal", "Reciprocal", [pos(3, 4)], {}, (), {}),
    ("dropout", "Dropout", [f(3, 4)], {}, (), {}),
    (
        "range",
        "Range",
        [np.array(1, np.int64), np.array(10, np.int64), np.array(3, np.int64)],
        {},
        (0, 1, 2),
        {},
    ),
    (
        "range-float",
        "Range",
        [np.array(0.5, np.float32), np.array(-2.0, np.float32), np.array(-0.75, np.float32)],
        {},
        (0, 1, 2),
        {},
    ),
    ("trilu-upper", "Trilu", [f(2, 4, 5), np.array(1, np.int64)], {}, (1,), {}),
    ("trilu-lower", "Trilu", [f(4, 5), np.array(-1, np.int64)], {"upper": 0}, (1,), {}),
    ("einsum-matmul", "Einsum", [f(3, 4), f(4, 5)], {"equation": "ij,jk->ik"}, (), {}),
    ("einsum-batch", "Einsum", [f(2, 3, 4), f(2, 4, 5)], {"equation": "bij,bjk->bik"}, (), {}),
    ("einsum-implicit", "Einsum", [f(3, 4), f(3, 4)], {"equation": "ij,ij"}, (), {}),
    ("einsum-ellipsis", "Einsum", [f(2, 3, 4), f(4)], {"equation": "...j,j->..."}, (), {}),
    ("einsum-transpose", "Einsum", [f(3, 4)], {"equation": "ij->ji"}, (), {}),
    ("sin", "Sin", [f(3, 4)], {}, (), {}),
    ("cos", "Cos", [f(3, 4)], {}, (), {}),
    (
        "mod-int",
        "Mod",
        [ints(3, 4), ints(3, 4, lo=1, hi=5) * np.where(R.random((3, 4)) < 0.5, -1, 1)],
        {},
        (),
        {},
    ),
    ("mod-fmod", "Mod", [f(3, 4), pos(3, 4)], {"fmod": 1}, (), {}),
    ("split", "Split", [f(6, 4), i64(2, 4)], {"axis": 0}, (1,), {"n_outputs": 2}),
    ("split-equal", "Split", [f(6, 4)], {"axis": 1, "num_outputs": 2}, (), {"n_outputs": 2}),
    ("split-opset13", "Split", [f(6, 4)], {"axis": 0}, (), {"n_outputs": 3, "opset": 13}),
    ("tile", "Tile", [f(2, 3), i64(2, 3)], {}, (1,), {}),
    ("softplus", "Softplus", [f(3, 4, lo=-30, hi=30)], {}, (), {}),
    ("hard-sigmoid", "HardSigmoid", [f(3, 4)], {}, (), {}),
    ("elu", "Elu", [f(3, 4)], {"alpha": 0.7}, (), {}),
]

# The ops added for the ONNX conformance suite live in their own module (file size).
from tests.helpers.onnx_cases_more import MORE_CASES  # noqa: E402

CASES += MORE_CASES
