"""ONNX frontend: read a file safely, check it, and lower every node into the IR.

Steps, in order: read the protobuf (no external data yet); confine and check every
external-data reference; load external data; run onnx's checker and strict shape
inference; bind symbolic input dims; lower node by node (constants fold as they are
built); check the outputs against the shapes ONNX inferred.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import external_data_helper, helper, numpy_helper

from luminal.compiler.frontend import onnx_control, onnx_functions
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.frontend.onnx_ops import DOMAIN_OPS, OPS, NodeContext
from luminal.compiler.frontend.onnx_ops.context import DataDependent
from luminal.compiler.frontend.onnx_precision import ValueTypes, widen
from luminal.compiler.frontend.onnx_precision import narrow as narrow_result
from luminal.compiler.ir import GraphBuilder, Value
from luminal.compiler.ir.dtypes import ONNX_DTYPES
from luminal.errors import (
    FrontendError,
    GraphError,
    ModelLoadError,
    UnsupportedOp,
    UsageError,
    one_line,
)

ONNX_TYPE_OF = {dtype: code for code, dtype in ONNX_DTYPES.items()}
MIN_OPSET = 7
MAX_OPSET = onnx.defs.onnx_opset_version()
_TWO_GB = 2**31


def load(path: str | os.PathLike[str], dims: Mapping[str, int] | None = None) -> LoadedModel:
    """Load and lower the ONNX model at `path`.  `dims` binds symbolic input dims."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{file}: no such model file")
    model = _read(file)
    _load_external_data(model, file)
    _check(model, file)
    return lower(model, dims or {}, source=str(file))


def lower(model: onnx.ModelProto, dims: Mapping[str, int], source: str = "<memory>") -> LoadedModel:
    """Lower an in-memory, already-checked ModelProto."""
    opset = _default_opset(model, source)
    graph = model.graph
    b = GraphBuilder()
    env: dict[str, Value] = {}
    params = 0
    for init in graph.initializer:
        array = _tensor(init, source)
        params += int(array.size)
        env[init.name] = b.const(array, name=init.name)
    for inp in graph.input:
        if inp.name not in env:
            env[inp.name] = _graph_input(b, inp, dims, source)
    histogram: collections.Counter[str] = collections.Counter()
    types = ValueTypes(model)
    imports = {
        o.domain if o.domain != "ai.onnx" else "": int(o.version) for o in model.opset_import
    }
    for node in graph.node:
        histogram[node.op_type] += 1
        with b.origin((node.name or (node.output[0] if node.output else node.op_type),)):
            _lower_node(b, node, env, opset, types, imports)
    outputs = {}
    for out in graph.output:
        if out.name not in env:
            raise ModelLoadError(source, f"graph output '{out.name}' is never produced")
        value = env[out.name]
        _check_declared(out, value, source)
        outputs[out.name] = value
    return LoadedModel(
        graph=b.build(outputs),
        source=source,
        format="onnx",
        source_ops=dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
        parameters=params,
        opset=opset,
        producer=f"{model.producer_name} {model.producer_version}".strip(),
    )


# ---- reading and checking ------------------------------------------------------------


def _read(file: Path) -> onnx.ModelProto:
    try:
        data = file.read_bytes()
    except OSError as err:
        raise UsageError(f"{file}: cannot read ({err.strerror})") from None
    if not data:
        raise ModelLoadError(file, "file is empty")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as err:  # protobuf raises DecodeError and, on some inputs, others
        raise ModelLoadError(
            file, f"not a valid ONNX file (truncated or corrupt): {one_line(err)}"
        ) from None
    if not model.HasField("graph") or not model.opset_import:
        raise ModelLoadError(
            file, "not a valid ONNX file: no graph or no opset (truncated or not ONNX?)"
        )
    return model


def _load_external_data(model: onnx.ModelProto, file: Path) -> None:
    """Confine every external-data reference to the model's folder, then load it."""
    base = file.resolve().parent
    external = [
        t
        for t in external_data_helper._get_all_tensors(model)
        if external_data_helper.uses_external_data(t)
    ]
    for tensor in external:
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        where = f"tensor '{tensor.name}' refers to external data '{location}'"
        if not location or os.path.isabs(location) or location.startswith(("\\", "/")):
            raise ModelLoadError(file, f"{where}: must be a path relative to the model's folder")
        target = (base / location).resolve()
        if not target.is_relative_to(base):
            raise ModelLoadError(file, f"{where}, which is outside the model's folder {base}")
        if not target.is_file():
            raise ModelLoadError(file, f"{where}, which does not exist")
        offset, length = int(info.get("offset", 0) or 0), info.get("length")
        size = target.stat().st_size
        if offset < 0 or offset > size or (length is not None and offset + int(length) > size):
            raise ModelLoadError(
                file, f"{where}: offset/length past the end of the file ({size} bytes)"
            )
    if external:
        try:
            external_data_helper.load_external_data_for_model(model, str(base))
        except Exception as err:
            raise ModelLoadError(file, f"cannot load external data: {one_line(err)}") from None


def _check(model: onnx.ModelProto, file: Path) -> None:
    try:
        if model.ByteSize() < _TWO_GB:
            onnx.checker.check_model(model)
        else:
            onnx.checker.check_model(str(file))
    except Exception as err:
        raise ModelLoadError(file, f"fails the ONNX checker: {one_line(err)}") from None
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as err:
        raise ModelLoadError(file, f"fails ONNX shape inference: {one_line(err)}") from None


def _default_opset(model: onnx.ModelProto, source: str) -> int:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            if not MIN_OPSET <= entry.version <= MAX_OPSET:
                raise UnsupportedOp(
                    f"opset {entry.version} is outside the supported range {MIN_OPSET}-{MAX_OPSET}; "
                    "convert it with onnx.version_converter",
                    opset=entry.version,
                )
            return int(entry.version)
    # Only other domains (ai.onnx.ml, training): their nodes name their own opset; an
    # expanded function body brings its own default-domain version.
    return MAX_OPSET


def _tensor(tensor: onnx.TensorProto, source: str) -> np.ndarray:
    if tensor.data_type not in ONNX_DTYPES:
        name = onnx.TensorProto.DataType.Name(tensor.data_type)
        raise UnsupportedOp(
            f"initializer '{tensor.name}' has element type {name}, which is not supported"
        )
    try:
        return numpy_helper.to_array(tensor)
    except Exception as err:
        raise ModelLoadError(
            source, f"initializer '{tensor.name}' is unreadable: {one_line(err)}"
        ) from None


def _graph_input(
    b: GraphBuilder, inp: onnx.ValueInfoProto, dims: Mapping[str, int], source: str
) -> Value:
    ttype = inp.type.tensor_type
    if not inp.type.HasField("tensor_type"):
        raise UnsupportedOp(
            f"graph input '{inp.name}' is not a tensor (sequences, maps and optionals are not supported)"
        )
    dtype = ONNX_DTYPES.get(ttype.elem_type)
    if dtype is None:
        name = onnx.TensorProto.DataType.Name(ttype.elem_type)
        raise UnsupportedOp(
            f"graph input '{inp.name}' has element type {name}, which is not supported"
        )
    if not ttype.HasField("shape"):
        raise ModelLoadError(source, f"graph input '{inp.name}' has no shape")
    shape = []
    for k, dim in enumerate(ttype.shape.dim):
        if dim.HasField("dim_value"):
            shape.append(int(dim.dim_value))
        elif dim.dim_param and dim.dim_param in dims:
            shape.append(int(dims[dim.dim_param]))
        else:
            label = dim.dim_param or f"#{k}"
            raise UsageError(
                f"graph input '{inp.name}' has symbolic dim '{label}' (axis {k}); bind it with --dim {label}=N"
            )
    return b.input(inp.name, shape, dtype)


def _lower_node(
    b: GraphBuilder,
    node: onnx.NodeProto,
    env: dict[str, Value],
    opset: int,
    types: ValueTypes,
    imports: Mapping[str, int],
    depth: int = 0,
) -> None:
    name = node.name or (node.output[0] if node.output else "?")
    standard = node.domain in ("", "ai.onnx")
    if standard and node.op_type in onnx_control.CONTROL:

        def lower_inner(inner: onnx.NodeProto, scope: dict[str, Value]) -> None:
            _lower_node(b, inner, scope, opset, types, imports, depth + 1)

        outs = onnx_control.CONTROL[node.op_type](b, node, env, opset, lower_inner)  # type: ignore[arg-type]
        for out_name, value in zip(node.output, outs, strict=False):
            if out_name:
                env[out_name] = value
        return
    lowering = OPS.get(node.op_type) if standard else DOMAIN_OPS.get((node.domain, node.op_type))
    if lowering is None:
        version = opset if standard else imports.get(node.domain)
        if (
            version is None
            or depth > 8
            or not _lower_function(b, node, env, version, types, imports, depth)
        ):
            what = (
                "not supported" if standard else f"custom domain '{node.domain}' is not supported"
            )
            raise UnsupportedOp(what, op=node.op_type, node=name, opset=opset)
        return
    inputs = []
    for i in node.input:
        if i and i not in env:
            raise FrontendError(
                f"input '{i}' is used before it is produced",
                op=node.op_type,
                node=name,
                opset=opset,
            )
        inputs.append(env[i] if i else None)
    original = [None if v is None else v.dtype for v in inputs]
    inputs, narrow = widen(b, inputs)
    ctx = NodeContext(
        b, node, inputs, opset, narrow=next(iter(narrow)) if len(narrow) == 1 else None
    )
    try:
        outs = list(lowering(ctx))
        if narrow:
            outs = [
                v if v is None else narrow_result(b, node, o, v, original, types)
                for o, v in zip(node.output, outs, strict=False)
            ]
    except GraphError as err:
        raise FrontendError(str(err), op=node.op_type, node=name, opset=opset) from None
    unread = ctx.unread_attrs()
    if unread:
        raise UnsupportedOp(
            f"attribute(s) {unread} not supported", op=node.op_type, node=name, opset=opset
        )
    for out_name, value in zip(node.output, outs, strict=False):
        if out_name and value is not None:
            env[out_name] = value
    missing = [
        o
        for o, v in zip(node.output, outs + [None] * len(node.output), strict=False)
        if o and v is None
    ]
    if missing:
        raise UnsupportedOp(
            f"output(s) {missing} not supported", op=node.op_type, node=name, opset=opset
        )


def _lower_function(
    b: GraphBuilder,
    node: onnx.NodeProto,
    env: dict[str, Value],
    version: int,
    types: ValueTypes,
    imports: Mapping[str, int],
    depth: int,
) -> bool:
    """Lower `node` through its schema's function body; False if it defines none."""
    input_types = [
        helper.make_tensor_type_proto(ONNX_TYPE_OF[env[i].dtype], env[i].shape)
        if i and i in env
        else None
        for i in node.input
    ]
    found = onnx_functions.function_body(node, version, input_types)
    if found is None:
        return False
    body, body_imports = found
    scope = {**imports, **body_imports}
    inner_opset = body_imports.get("", version if node.domain in ("", "ai.onnx") else MAX_OPSET)
    name = node.name or (node.output[0] if node.output else "?")
    for inner in body:
        try:
            _lower_node(b, inner, env, inner_opset, types, scope, depth + 1)
        except DataDependent as err:  # name the node's inputs it derives from
            outer = onnx_functions.sources(body, err.values, set(node.input))
            raise DataDependent(
                str(err), values=tuple(outer), op=node.op_type, node=name, opset=version
            ) from None
        except FrontendError as err:
            raise type(err)(
                f"in its ONNX function body: {err}", op=node.op_type, node=name, opset=version
            ) from None
    return True


def _check_declared(out: onnx.ValueInfoProto, value: Value, source: str) -> None:
    ttype = out.type.tensor_type
    declared = [d.dim_value if d.HasField("dim_value") else None for d in ttype.shape.dim]
    if ttype.HasField("shape") and len(declared) == value.ndim:
        if all(d is None or d == v for d, v in zip(declared, value.shape, strict=True)):
            return
    elif not ttype.HasField("shape"):
        return
    raise ModelLoadError(
        source, f"graph output '{out.name}' is declared {declared} but computes {list(value.shape)}"
    )
