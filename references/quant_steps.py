"""One quantization step per graph output, read from what the ONNX graph says: the input
of `references.parity`'s step rule (its docstring).

    quantization_steps(model) -> {output name: step}

An output gets a step when the op that produces it (through view ops that move values
without changing them: Identity, Reshape, Flatten, Transpose, Squeeze, Unsqueeze) is

- DequantizeLinear with a constant scale: the largest scale (per axis: the coarsest
  channel's), the float value of one integer step;
- QuantizeLinear, DynamicQuantizeLinear's first output, or a QLinear/QGemm op with an
  integer output: 1, one integer step.

Any other output (float arithmetic after a dequantize, a LayerNormalization say) gets none
and is held to the dtype's float tolerance.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where a model is read: onnx (with ml_dtypes) takes 0.6 s
    import onnx

#: ops that only move values: the step of their input is the step of their output
_VIEWS = frozenset({"Identity", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze"})
#: ops whose (first) output is an integer one quantization step apart from another run's
_INTEGER = frozenset(
    {
        "QuantizeLinear",
        "DynamicQuantizeLinear",
        "QLinearMatMul",
        "QLinearConv",
        "QGemm",
        "QLinearAdd",
        "QLinearMul",
        "QLinearGlobalAveragePool",
        "QLinearAveragePool",
        "QLinearSoftmax",
        "QLinearSigmoid",
        "QLinearLeakyRelu",
        "QLinearConcat",
    }
)


#: ops that make a graph a quantized one (`is_quantized`): every op above and the integer
#: contractions
_QUANTIZED = _INTEGER | {"DequantizeLinear", "MatMulInteger", "ConvInteger"}


def is_quantized(model: onnx.ModelProto) -> bool:
    """Whether the graph quantizes or computes on quantized values anywhere (subgraphs of
    control flow included)."""
    return any(node.op_type in _QUANTIZED for node in _nodes(model.graph))


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    import onnx

    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _nodes(g)


def quantization_steps(model: onnx.ModelProto) -> dict[str, float]:
    """Each graph output computed through quantization, and its step (module docstring)."""
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output if out}
    consts: dict[str, onnx.TensorProto] = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = node.attribute[0].t
    steps = {}
    for out in graph.output:
        step = _step(out.name, producer, consts)
        if step:
            steps[out.name] = step
    return steps


def steps_of_file(path: Path | None) -> dict[str, float]:
    """`quantization_steps` of an ONNX file; none for anything else (a .pt2 program)."""
    model = _onnx_file(path)
    return {} if model is None else quantization_steps(model)


def is_quantized_file(path: Path | None) -> bool:
    """`is_quantized` of an ONNX file; False for anything else."""
    model = _onnx_file(path)
    return model is not None and is_quantized(model)


def _onnx_file(path: Path | None) -> onnx.ModelProto | None:
    """The graph of an ONNX file (without its weights); None for anything else."""
    if path is None or Path(path).suffix != ".onnx":
        return None
    import onnx

    return onnx.load(str(path), load_external_data=False)


def _step(
    name: str, producer: Mapping[str, onnx.NodeProto], consts: Mapping[str, onnx.TensorProto]
) -> float:
    node = producer.get(name)
    while node is not None and node.op_type in _VIEWS and node.input:
        node = producer.get(node.input[0])
    if node is None:
        return 0.0
    if node.op_type == "DequantizeLinear" and len(node.input) > 1:
        scale = consts.get(node.input[1])
        if scale is None:
            return 0.0
        from onnx import numpy_helper

        return float(np.max(np.abs(numpy_helper.to_array(scale).astype(np.float64))))
    if node.op_type in _INTEGER and node.output[0] == _first_output_of(node, name, producer):
        if node.op_type == "QGemm" and (len(node.input) < 8 or not node.input[7]):
            return 0.0  # QGemm without y_scale has a float output
        return 1.0
    return 0.0


def _first_output_of(
    node: onnx.NodeProto, name: str, producer: Mapping[str, onnx.NodeProto]
) -> str:
    """The output of `node` that `name` reaches through views: `name` itself, or the
    view chain's source."""
    current = name
    while current not in node.output:
        current = producer[current].input[0]
    return current
