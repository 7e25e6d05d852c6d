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
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

_EIGHT_BIT = (onnx.TensorProto.UINT8, onnx.TensorProto.INT8)
_CONV_ATTRS = frozenset({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})


def integer_contractions(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every QDQ unit (module docstring) as the QLinear op ONNX Runtime
    fuses it into, and every other QDQ Conv/MatMul/Gemm as an integer contraction; the
    same object when there is none."""
    return _pass(_pass(model, _unit), _rewrite)


def _pass(model: onnx.ModelProto, rewrite) -> onnx.ModelProto:  # type: ignore[no-untyped-def]
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output if out}
    elem = _element_types(model)
    consts = {t.name: t for t in graph.initializer}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    ctx = _Graph(producer, elem, consts, readers, outputs, [], set())
    nodes: list[onnx.NodeProto] = []
    changed = False
    for node in graph.node:
        if id(node) in ctx.replaced:
            continue
        rewritten = rewrite(node, ctx)
        nodes.extend(rewritten or [node])
        changed |= rewritten is not None
    if not changed:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(n for n in nodes if id(n) not in ctx.replaced)
    out.graph.initializer.extend(ctx.added)
    return out


@dataclass
class _Graph:
    """What a rewrite reads of the graph, and what it adds and replaces."""

    producer: Mapping[str, onnx.NodeProto]
    elem: Mapping[str, int]
    consts: Mapping[str, onnx.TensorProto]
    readers: Mapping[str, list[onnx.NodeProto]]
    outputs: frozenset[str] | set[str]
    added: list[onnx.TensorProto]
    replaced: set[int]  # ids of nodes a rewrite absorbed (the Q after a unit)


# ---- QDQ units as ONNX Runtime fuses them ------------------------------------------------

#: op -> the QLinear op ORT's QDQ transformer makes of DQ inputs -> op -> Q
_UNITS = {
    "Conv": ("", "QLinearConv"),
    "MatMul": ("", "QLinearMatMul"),
    "Gemm": ("com.microsoft", "QGemm"),
    "Add": ("com.microsoft", "QLinearAdd"),
    "Mul": ("com.microsoft", "QLinearMul"),
    "GlobalAveragePool": ("com.microsoft", "QLinearGlobalAveragePool"),
}


def _only_q(name: str, g: _Graph) -> onnx.NodeProto | None:
    """The QuantizeLinear that is the only reader of `name` (not a graph output), with a
    constant per-tensor scale."""
    users = g.readers.get(name, [])
    if name in g.outputs or len(users) != 1 or users[0].op_type != "QuantizeLinear":
        return None
    q = users[0]
    if q.input[0] != name or _size(q.input[1], g.consts) != 1 or len(q.input) < 3:
        return None
    return q


def _unit(node: onnx.NodeProto, g: _Graph) -> list[onnx.NodeProto] | None:
    if node.op_type not in _UNITS or node.domain not in ("", "ai.onnx") or not node.output:
        return None
    q = _only_q(node.output[0], g)
    if q is None:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    op = node.op_type
    arity = 1 if op == "GlobalAveragePool" else 2
    dqs = [_dq(name, g.producer, g.elem) for name in node.input[:arity]]
    if any(d is None or len(d.input) < 3 for d in dqs):
        return None
    per_tensor = [_size(d.input[1], g.consts) == 1 for d in dqs]  # type: ignore[union-attr]
    if op in ("Add", "Mul", "GlobalAveragePool") and not all(per_tensor):
        return None
    if op in ("Conv", "MatMul", "Gemm") and not per_tensor[0]:
        return None
    if op in ("Conv", "MatMul", "Gemm") and not per_tensor[1]:
        w = g.consts.get(dqs[1].input[0])  # type: ignore[union-attr]
        channel = {"Conv": 0, "MatMul": 1, "Gemm": 0 if attrs.get("transB", 0) else 1}[op]
        if w is None or (op != "Conv" and len(w.dims) != 2):
            return None
        if _axis(dqs[1], len(w.dims)) != channel:  # type: ignore[arg-type]
            return None
    if op == "Gemm" and (attrs.get("transA", 0) or float(attrs.get("beta", 1.0)) != 1.0):
        return None
    triples = [x for d in dqs for x in d.input[:3]]  # type: ignore[union-attr]
    bias = None
    if op in ("Conv", "Gemm") and len(node.input) > 2 and node.input[2]:
        bias = _int_bias(node.input[2], dqs, g)
        if bias is None:
            return None
    domain, qop = _UNITS[op]
    if op == "GlobalAveragePool":
        inputs = [*triples, q.input[1], q.input[2]]
    elif op == "Gemm":
        inputs = [*triples, bias or "", q.input[1], q.input[2]]
    elif op in ("Add", "Mul"):
        inputs = [*triples, q.input[1], q.input[2]]
    else:
        inputs = [*triples, q.input[1], q.input[2], *([bias] if bias else [])]
    kept = {k: v for k, v in attrs.items() if op != "Gemm" or k in ("alpha", "transB")}
    fused = helper.make_node(qop, inputs, [q.output[0]], domain=domain, **kept)
    fused.name = f"{node.name or node.output[0]}/int8:{qop}"
    g.replaced.add(id(q))
    return [fused]


def _int_bias(name: str, dqs: list, g: _Graph) -> str | None:  # type: ignore[type-arg]
    """The int32 bias of a Conv/Gemm unit: DequantizeLinear(b_q int32, sx sw, 0)."""
    d = g.producer.get(name)
    if (
        d is None
        or d.op_type != "DequantizeLinear"
        or g.elem.get(d.input[0]) != onnx.TensorProto.INT32
    ):
        return None
    if any(n not in g.consts for n in (d.input[1], dqs[0].input[1], dqs[1].input[1])):
        return None
    if len(d.input) > 2 and d.input[2]:
        zero = g.consts.get(d.input[2])
        if zero is None or np.any(numpy_helper.to_array(zero)):
            return None
    arr = lambda n: numpy_helper.to_array(g.consts[n]).astype(np.float32)  # noqa: E731
    want = arr(dqs[0].input[1]) * arr(dqs[1].input[1])
    if not np.allclose(arr(d.input[1]), want, rtol=1e-6, atol=0):
        return None  # quantized with another scale: the float path keeps it exact
    return str(d.input[0])


# ---- the rest: integer contractions with a float scale after ------------------------------


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


def _rewrite(node: onnx.NodeProto, g: _Graph) -> list[onnx.NodeProto] | None:
    producer, elem, consts, added = g.producer, g.elem, g.consts, g.added
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
