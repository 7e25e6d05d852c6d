"""ONNX frontend: read a file safely, check it, and lower every node into the IR.

Steps, in order: read the protobuf (no external data yet); confine and check every
external-data reference; load external data; run onnx's checker and strict shape
inference; bind symbolic input dims; lower node by node (constants fold as they are
built; `onnx_nodes`); check the outputs against the shapes ONNX inferred.

Lowering records each node's outcome in a `coverage.Recorder` and goes on past a refused
node: `lower` then raises one UnsupportedOp naming every refusal (compile), `analyze`
returns the op coverage with whatever did lower (inspect).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import external_data_helper, numpy_helper

from luminal.compiler.frontend import onnx_nodes
from luminal.compiler.frontend.coverage import (
    Coverage,
    Reason,
    Recorder,
    Refusal,
    build_coverage,
    opset_refused,
)
from luminal.compiler.frontend.model import Analysis, LoadedModel
from luminal.compiler.frontend.onnx_precision import ValueTypes
from luminal.compiler.frontend.onnx_qdq import integer_contractions
from luminal.compiler.ir import GraphBuilder, TensorSpec, Value
from luminal.compiler.ir.dtypes import ONNX_DTYPES
from luminal.errors import ModelLoadError, UnsupportedOp, UsageError, one_line

MIN_OPSET = 7
MAX_OPSET = onnx.defs.onnx_opset_version()
_TWO_GB = 2**31


def load(path: str | os.PathLike[str], dims: Mapping[str, int] | None = None) -> LoadedModel:
    """Load and lower the ONNX model at `path`.  `dims` binds symbolic input dims."""
    file = Path(path)
    return lower(_read_checked(file), dims or {}, source=str(file))


def analyze_file(path: str | os.PathLike[str], dims: Mapping[str, int] | None = None) -> Analysis:
    """`analyze` the ONNX model at `path` (read and checked as `load` does)."""
    file = Path(path)
    return analyze(_read_checked(file), dims or {}, source=str(file))


def lower(model: onnx.ModelProto, dims: Mapping[str, int], source: str = "<memory>") -> LoadedModel:
    """Lower an in-memory, already-checked ModelProto.  Every unsupported op is named in one
    UnsupportedOp (a single one keeps its own message)."""
    opset = _default_opset(model, source)
    recorder = Recorder()
    lowered = _lower(integer_contractions(model), dims, source, opset, recorder)
    recorder.raise_if_refused()
    return lowered.loaded(model)


def analyze(model: onnx.ModelProto, dims: Mapping[str, int], source: str = "<memory>") -> Analysis:
    """Lower as far as the model allows and say, per op kind, what is supported and why not.
    The IR model is there when nothing was refused."""
    imports = _imports(model)
    try:
        opset = _default_opset(model, source)
    except UnsupportedOp as err:
        found = onnx_nodes.census(model, MAX_OPSET, imports)
        return _facts(model, source, None, (), (), opset_refused(found, err))
    recorder = Recorder(keep_going=True)
    lowered = _lower(model, dims, source, opset, recorder)
    coverage = build_coverage(onnx_nodes.census(model, opset, imports), recorder)
    loaded = None if recorder.errors else lowered.loaded(model)
    return _facts(
        model, source, opset, lowered.input_specs(), lowered.output_specs(), coverage, loaded
    )


@dataclass(frozen=True)
class _Lowered:
    """A model lowered as far as it goes: the builder and every value computed."""

    b: GraphBuilder
    env: dict[str, Value]
    graph: onnx.GraphProto
    inputs: tuple[str, ...]  # the graph inputs that are not initializers
    source: str
    opset: int
    parameters: int

    def input_specs(self) -> tuple[TensorSpec, ...]:
        return tuple(_spec(n, self.env[n]) for n in self.inputs if n in self.env)

    def output_specs(self) -> tuple[TensorSpec, ...]:
        return tuple(
            _spec(o.name, self.env[o.name]) for o in self.graph.output if o.name in self.env
        )

    def loaded(self, model: onnx.ModelProto) -> LoadedModel:
        outputs = {}
        for out in model.graph.output:
            if out.name not in self.env:
                raise ModelLoadError(self.source, f"graph output '{out.name}' is never produced")
            value = self.env[out.name]
            _check_declared(out, value, self.source)
            outputs[out.name] = value
        return LoadedModel(
            graph=self.b.build(outputs),
            source=self.source,
            format="onnx",
            source_ops=_histogram(model),
            parameters=self.parameters,
            opset=self.opset,
            producer=_producer(model),
        )


def _lower(
    model: onnx.ModelProto,
    dims: Mapping[str, int],
    source: str,
    opset: int,
    recorder: Recorder,
) -> _Lowered:
    graph = model.graph
    b = GraphBuilder()
    env: dict[str, Value] = {}
    params = 0
    for init in graph.initializer:
        try:
            array = _tensor(init, source)
        except UnsupportedOp as err:
            recorder.problem(err, [init.name], f"initializer '{init.name}'")
            continue
        params += int(array.size)
        env[init.name] = b.const(array, name=init.name)
    inputs = []
    for inp in graph.input:
        if inp.name not in env and inp.name not in recorder.blocked:
            inputs.append(inp.name)
            try:
                env[inp.name] = _graph_input(b, inp, dims, source)
            except UnsupportedOp as err:
                recorder.problem(err, [inp.name], f"graph input '{inp.name}'")
    run = onnx_nodes.Run(
        b=b,
        types=ValueTypes(model),
        functions={(f.domain, f.name): f for f in model.functions},
        recorder=recorder,
        max_opset=MAX_OPSET,
    )
    imports = _imports(model)
    for node in graph.node:
        with b.origin((node.name or (node.output[0] if node.output else node.op_type),)):
            onnx_nodes.lower_node(run, node, env, opset, imports)
    return _Lowered(b, env, graph, tuple(inputs), source, opset, params)


def _imports(model: onnx.ModelProto) -> dict[str, int]:
    return {o.domain if o.domain != "ai.onnx" else "": int(o.version) for o in model.opset_import}


def _histogram(model: onnx.ModelProto) -> dict[str, int]:
    histogram = collections.Counter(node.op_type for node in model.graph.node)
    return dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0])))


def _producer(model: onnx.ModelProto) -> str:
    return f"{model.producer_name} {model.producer_version}".strip()


def _spec(name: str, value: Value) -> TensorSpec:
    return TensorSpec(name, tuple(value.shape), value.dtype)


def _facts(
    model: onnx.ModelProto,
    source: str,
    opset: int | None,
    inputs: tuple[TensorSpec, ...],
    outputs: tuple[TensorSpec, ...],
    coverage: Coverage,
    loaded: LoadedModel | None = None,
) -> Analysis:
    parameters = sum(int(np.prod(t.dims, dtype=np.int64)) for t in model.graph.initializer)
    return Analysis(
        source=source,
        format="onnx",
        producer=_producer(model),
        opset=opset,
        parameters=parameters,
        source_ops=_histogram(model),
        inputs=inputs,
        outputs=outputs,
        coverage=coverage,
        model=loaded,
    )


# ---- reading and checking ------------------------------------------------------------


def _read_checked(file: Path) -> onnx.ModelProto:
    if not file.is_file():
        raise UsageError(f"{file}: no such model file")
    model = _read(file)
    _load_external_data(model, file)
    _check(model, file)
    return model


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
                raise Refusal(
                    Reason.OPSET,
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
        raise Refusal(
            Reason.ELEMENT_TYPE,
            f"initializer '{tensor.name}' has element type {name}, which is not supported",
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
        raise Refusal(
            Reason.ELEMENT_TYPE,
            f"graph input '{inp.name}' is not a tensor (sequences, maps and optionals are not supported)",
        )
    dtype = ONNX_DTYPES.get(ttype.elem_type)
    if dtype is None:
        name = onnx.TensorProto.DataType.Name(ttype.elem_type)
        raise Refusal(
            Reason.ELEMENT_TYPE,
            f"graph input '{inp.name}' has element type {name}, which is not supported",
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
                f"graph input '{inp.name}' has symbolic dim '{label}' (axis {k}); bind it with "
                f"--dim {label}=N or serve a range with --profile {label}=MIN..MAX"
            )
    return b.input(inp.name, shape, dtype)


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
