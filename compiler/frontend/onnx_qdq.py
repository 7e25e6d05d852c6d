"""QDQ contractions as integer contractions: an ONNX-to-ONNX rewrite before lowering.

A QDQ model (`onnxruntime.quantization.quantize_static`, QuantFormat.QDQ) spells an int8
convolution as float ops between dequantizes:

    DequantizeLinear(x_q, sx, zx) -> Conv / MatMul / Gemm <- DequantizeLinear(w_q, sw, zw)

Since DQ(x) . DQ(w) = sx sw sum (x_q - zx)(w_q - zw), the contraction is rewritten to the
integer one the quantized operands define, with one float scale at the end:

    ConvInteger / MatMulInteger(x_q, w_q, zx, zw)  (i32 accumulation)
      -> Cast(float) -> Mul(sx sw) [-> Add(bias)]

The integer sum is exact, so the result is the float one's up to its rounding; the
QuantizeLinear that usually follows requantizes it as before.  Only the patterns whose
integer form is exact are rewritten: x per tensor, w per tensor or per output channel
(Conv axis 0, MatMul axis 1, Gemm along N), 8-bit operands, no blocked scales, Gemm
without transA.  Everything else is left as it is (and still lowers, in float).  The
dequantizes stay in the graph; lowering drops the ones nothing reads any more.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

_EIGHT_BIT = (onnx.TensorProto.UINT8, onnx.TensorProto.INT8)
_CONV_ATTRS = frozenset({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})


def integer_contractions(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every QDQ Conv/MatMul/Gemm (module docstring) as an integer
    contraction; the same object when there is none."""
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output if out}
    elem = _element_types(model)
    consts = {t.name: t for t in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    added: list[onnx.TensorProto] = []
    changed = False
    for node in graph.node:
        rewritten = _rewrite(node, producer, elem, consts, added)
        nodes.extend(rewritten or [node])
        changed |= rewritten is not None
    if not changed:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(added)
    return out


def _element_types(model: onnx.ModelProto) -> dict[str, int]:
    g = model.graph
    types = {t.name: t.data_type for t in g.initializer}
    for vi in (*g.input, *g.value_info, *g.output):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    for node in g.node:  # a QuantizeLinear's output type is its zero point's
        if node.op_type == "QuantizeLinear" and len(node.input) > 2 and node.input[2] in types:
            types[node.output[0]] = types[node.input[2]]
    return types


def _dq(
    name: str, producer: Mapping[str, onnx.NodeProto], elem: Mapping[str, int]
) -> onnx.NodeProto | None:
    """The DequantizeLinear producing `name`, when its input is 8-bit and unblocked."""
    node = producer.get(name)
    if node is None or node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx"):
        return None
    if any(a.name == "block_size" and a.i for a in node.attribute):
        return None
    if elem.get(node.input[0]) not in _EIGHT_BIT:
        return None
    return node


def _size(name: str, consts: Mapping[str, onnx.TensorProto]) -> int | None:
    t = consts.get(name)
    return None if t is None else int(np.prod(t.dims, dtype=np.int64))


def _axis(node: onnx.NodeProto, rank: int) -> int:
    for a in node.attribute:
        if a.name == "axis":
            return a.i % rank
    return 1 % rank


def _rewrite(
    node: onnx.NodeProto,
    producer: Mapping[str, onnx.NodeProto],
    elem: Mapping[str, int],
    consts: Mapping[str, onnx.TensorProto],
    added: list[onnx.TensorProto],
) -> list[onnx.NodeProto] | None:
    if node.op_type not in ("Conv", "MatMul", "Gemm") or node.domain not in ("", "ai.onnx"):
        return None
    if len(node.input) < 2:
        return None
    dx, dw = _dq(node.input[0], producer, elem), _dq(node.input[1], producer, elem)
    if dx is None or dw is None or _size(dx.input[1], consts) != 1:
        return None  # the activation's scale must be one known per-tensor constant
    w = consts.get(dw.input[0])
    if w is None:
        return None  # a constant weight: its rank and channel axis are known
    rank = len(w.dims)
    ws = _size(dw.input[1], consts)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    channel = {"Conv": 0, "MatMul": 1 if rank == 2 else None}.get(node.op_type)
    if node.op_type == "Gemm":
        if attrs.get("transA", 0):
            return None
        channel = 0 if attrs.get("transB", 0) else 1
    if ws is None or (ws != 1 and (channel is None or _axis(dw, rank) != channel)):
        return None
    tag = node.name or node.output[0]
    n = lambda s: f"{tag}/int8/{s}"  # noqa: E731
    zeros = [dx.input[2] if len(dx.input) > 2 else "", dw.input[2] if len(dw.input) > 2 else ""]
    out: list[onnx.NodeProto] = []
    wq = dw.input[0]
    if node.op_type == "Conv":
        kept = {k: v for k, v in attrs.items() if k in _CONV_ATTRS}
        out.append(helper.make_node("ConvInteger", [dx.input[0], wq, *zeros], [n("acc")], **kept))
    else:
        if node.op_type == "Gemm" and attrs.get("transB", 0):
            out.append(helper.make_node("Transpose", [wq], [n("wt")], perm=[1, 0]))
            wq = n("wt")
        out.append(helper.make_node("MatMulInteger", [dx.input[0], wq, *zeros], [n("acc")]))
    out.append(helper.make_node("Cast", [n("acc")], [n("accf")], to=onnx.TensorProto.FLOAT))
    out.append(helper.make_node("Mul", [dx.input[1], dw.input[1]], [n("scale")]))
    scale = n("scale")
    alpha = float(attrs.get("alpha", 1.0))
    if ws != 1 and node.op_type == "Conv":  # per output channel: (1, C, 1, ...)
        shape = np.array([1, ws, *([1] * (rank - 2))], np.int64)
        added.append(numpy_helper.from_array(shape, n("cshape")))
        out.append(helper.make_node("Reshape", [scale, n("cshape")], [n("cscale")]))
        scale = n("cscale")
    if alpha != 1.0:
        added.append(numpy_helper.from_array(np.array(alpha, np.float32), n("alpha")))
        out.append(helper.make_node("Mul", [scale, n("alpha")], [n("ascale")]))
        scale = n("ascale")
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    result = node.output[0]
    out.append(helper.make_node("Mul", [n("accf"), scale], [n("y") if bias else result]))
    if bias:
        if node.op_type == "Conv":
            added.append(numpy_helper.from_array(np.array([1, -1, *([1] * (rank - 2))]), n("bs")))
            out.append(helper.make_node("Reshape", [bias, n("bs")], [n("b")]))
            bias = n("b")
        elif node.op_type == "Gemm" and float(attrs.get("beta", 1.0)) != 1.0:
            beta = np.array(float(attrs["beta"]), np.float32)
            added.append(numpy_helper.from_array(beta, n("beta")))
            out.append(helper.make_node("Mul", [bias, n("beta")], [n("bb")]))
            bias = n("bb")
        out.append(helper.make_node("Add", [n("y"), bias], [result]))
    for i, k in enumerate(out):
        k.name = f"{tag}/int8/{i}:{k.op_type}"
    return out
