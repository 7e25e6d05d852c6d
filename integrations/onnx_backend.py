"""The ONNX Backend API (`onnx.backend.base.Backend`) over luminal.

    from luminal.integrations import onnx_backend as backend

    rep = backend.prepare(model)          # an onnx.ModelProto; compiles to native code
    y, = rep.run([x])                     # a list (graph-input order) or a dict of arrays
    y, = backend.run_node(node, [x])      # one node, opset of the installed onnx

Shapes are static in luminal, so a rep compiles once per distinct set of input shapes
(a symbolic dim binds to the size it is fed).  An input that the model uses as a shape,
axes, pads, repeats, ... (a Reshape whose `shape` is fed at run time) is *specialized*:
its value becomes a constant of the compiled program, compiled once per distinct value.
Tensor data always stays a real input.  What cannot be lowered raises `UnsupportedOp`
(or another `LuminalError`) naming the op and the node, at `prepare` when the input
shapes are static, else at the first `run`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, version_converter
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from luminal.compiler.frontend import onnx as onnx_frontend
from luminal.compiler.frontend.onnx_functions import sources
from luminal.compiler.frontend.onnx_ops.context import DataDependent
from luminal.compiler.pipeline import CompileOptions
from luminal.compiler.runtime import Session
from luminal.errors import ModelLoadError, UnsupportedOp, UsageError, one_line
from luminal.integrations.build import compile_to_session

SOURCE = "<onnx backend>"
_Key = tuple[Any, ...]


class LuminalRep(BackendRep):
    """A prepared model: compiled programs keyed by input shapes and specialized values."""

    def __init__(self, model: onnx.ModelProto, options: CompileOptions) -> None:
        self.model = model
        self.options = options
        initialized = {t.name for t in model.graph.initializer}
        self.inputs = [i for i in model.graph.input if i.name not in initialized]
        self.input_names = [i.name for i in self.inputs]
        self.output_names = [o.name for o in model.graph.output]
        self.static: set[str] = set()  # inputs specialized as constants
        self._sessions: dict[_Key, Session] = {}
        self._lock = threading.Lock()

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        feeds = self._feeds(inputs)
        session = self.session_for(feeds)
        outs = session.run({n: a for n, a in feeds.items() if n not in self.static})
        return namedtupledict("Outputs", self.output_names)(*(outs[n] for n in self.output_names))

    def session_for(self, feeds: Mapping[str, np.ndarray]) -> Session:
        """The compiled program for these feeds, compiling it on first use."""
        with self._lock:
            found = self._sessions.get(self._key(feeds))
            if found is None:
                found = self._compile(
                    {n: a.shape for n, a in feeds.items()},
                    {n: a.dtype for n, a in feeds.items()},
                    feeds,
                )
            return found

    def compile_declared(self) -> None:
        """Compile for the declared input shapes when they are all static, unless the
        model needs input values (specialization) first."""
        shapes, dtypes = {}, {}
        for inp in self.inputs:
            dims = _declared_dims(inp)
            if dims is None or any(d is None for d in dims):
                return
            shapes[inp.name] = tuple(int(d) for d in dims)  # type: ignore[arg-type]
            dtypes[inp.name] = _declared_dtype(inp)
        with self._lock:
            try:
                self._compile(shapes, dtypes, {})
            except DataDependent as err:
                if not _inputs_feeding(self.model, err.values, set(self.input_names)):
                    raise

    # ---- internals ---------------------------------------------------------------------

    def _key(self, feeds: Mapping[str, np.ndarray]) -> _Key:
        shapes = tuple((n, feeds[n].shape, feeds[n].dtype.str) for n in self.input_names)
        values = tuple((n, feeds[n].tobytes()) for n in sorted(self.static))
        return shapes, values

    def _compile(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype | None],
        values: Mapping[str, np.ndarray],
    ) -> Session:
        while True:
            try:
                specialized = _specialize(self.model, self.inputs, shapes, values, self.static)
                loaded = onnx_frontend.lower(specialized, {}, source=SOURCE)
                break
            except DataDependent as err:
                more = _inputs_feeding(self.model, err.values, set(self.input_names)) - self.static
                if not more or any(n not in values for n in more):
                    raise
                self.static |= more
        session = compile_to_session(loaded, self.options)
        if len(values) == len(self.input_names):  # fed: file under the feeds' key
            self._sessions[self._key(values)] = session
        else:
            self._sessions[_declared_key(self.input_names, shapes, dtypes)] = session
        return session

    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        if isinstance(inputs, Mapping):
            unknown = set(inputs) - set(self.input_names)
            if unknown:
                raise UsageError(
                    f"unknown input(s) {sorted(unknown)}; the model takes {self.input_names}"
                )
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise UsageError(f"missing input(s) {missing}")
            feeds = {n: np.asarray(inputs[n]) for n in self.input_names}
        else:
            arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(arrays) != len(self.input_names):
                raise UsageError(
                    f"the model takes {len(self.input_names)} input(s) {self.input_names}, got {len(arrays)}"
                )
            feeds = {n: np.asarray(a) for n, a in zip(self.input_names, arrays, strict=True)}
        for inp in self.inputs:
            want = _declared_dtype(inp)
            if want is not None and feeds[inp.name].dtype != want:
                raise UsageError(
                    f"input '{inp.name}' has dtype {feeds[inp.name].dtype}, the model wants {want}"
                )
        return feeds


class LuminalBackend(Backend):
    """`onnx.backend.base.Backend`: compiles through luminal for the local CPU."""

    options = CompileOptions()

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> LuminalRep:
        _check_device(device)
        try:
            onnx.checker.check_model(model)
        except Exception as err:
            raise ModelLoadError(SOURCE, f"fails the ONNX checker: {one_line(err)}") from None
        for where, values in (("input", model.graph.input), ("output", model.graph.output)):
            for value in values:
                kind = value.type.WhichOneof("value")
                if kind != "tensor_type":
                    raise UnsupportedOp(
                        f"graph {where} '{value.name}' is a {kind or 'untyped value'}; only "
                        "tensors are supported (sequences, maps, optionals and sparse tensors are not)"
                    )
        rep = LuminalRep(upgrade(model), cls.options)
        rep.compile_declared()
        return rep

    @classmethod
    def run_model(
        cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        """Run one node on `inputs` (one array per present node input, in order)."""
        arrays = [np.asarray(x) for x in inputs]
        names = [n for n in node.input if n]
        if len(names) != len(arrays):
            raise UsageError(f"node '{node.name}' takes {len(names)} input(s), got {len(arrays)}")
        graph_inputs = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, arrays, strict=True)
        ]
        outputs = [n for n in node.output if n]
        if outputs_info is not None:
            graph_outputs = [
                helper.make_tensor_value_info(
                    n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape
                )
                for n, (dt, shape) in zip(outputs, outputs_info, strict=False)
            ]
        else:
            graph_outputs = [helper.make_empty_tensor_value_info(n) for n in outputs]
        graph = helper.make_graph([node], node.name or node.op_type, graph_inputs, graph_outputs)
        opset = int(kwargs.get("opset_version", onnx.defs.onnx_opset_version()))
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        try:
            model = onnx.shape_inference.infer_shapes(model)
        except Exception as err:
            raise ModelLoadError(SOURCE, f"fails ONNX shape inference: {one_line(err)}") from None
        return cls.run_model(model, arrays, device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):
            return False


def upgrade(model: onnx.ModelProto) -> onnx.ModelProto:
    """A model older than the frontend's first opset, converted by ONNX's own
    `version_converter` (the oldest exporters still write opset 6)."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions or versions[0] >= onnx_frontend.MIN_OPSET:
        return model
    try:
        return version_converter.convert_version(model, onnx_frontend.MIN_OPSET)
    except Exception as err:
        raise UnsupportedOp(
            f"opset {versions[0]} is older than {onnx_frontend.MIN_OPSET} and onnx's "
            f"version converter cannot upgrade it: {one_line(err)}",
            opset=versions[0],
        ) from None


def _check_device(device: str) -> None:
    if not LuminalBackend.supports_device(device):
        raise UsageError(
            f"device '{device}' is not supported by the luminal ONNX backend; use 'CPU'"
        )


def _declared_dims(inp: onnx.ValueInfoProto) -> list[int | None] | None:
    ttype = inp.type.tensor_type
    if not inp.type.HasField("tensor_type") or not ttype.HasField("shape"):
        return None
    return [int(d.dim_value) if d.HasField("dim_value") else None for d in ttype.shape.dim]


def _declared_dtype(inp: onnx.ValueInfoProto) -> np.dtype | None:
    try:
        return helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
    except (KeyError, ValueError):
        return None


def _declared_key(
    names: Sequence[str],
    shapes: Mapping[str, tuple[int, ...]],
    dtypes: Mapping[str, np.dtype | None],
) -> _Key:
    return tuple(
        (n, tuple(shapes[n]), dtypes[n].str if dtypes[n] is not None else "") for n in names
    ), ()


def _specialize(
    model: onnx.ModelProto,
    inputs: Sequence[onnx.ValueInfoProto],
    shapes: Mapping[str, tuple[int, ...]],
    values: Mapping[str, np.ndarray],
    static: set[str],
) -> onnx.ModelProto:
    """A copy of `model` whose inputs have the given concrete shapes and whose `static`
    inputs are initializers holding their fed values."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    kept = []
    for inp in out.graph.input:
        if inp.name in static:
            out.graph.initializer.append(numpy_helper.from_array(values[inp.name], inp.name))
            continue
        if inp.name in shapes:
            _set_dims(inp, shapes[inp.name])
        kept.append(inp)
    del out.graph.input[:]
    out.graph.input.extend(kept)
    return out


def _set_dims(inp: onnx.ValueInfoProto, shape: tuple[int, ...]) -> None:
    if not inp.type.HasField("tensor_type"):
        return  # sequences and optionals: the frontend refuses them by name
    declared = _declared_dims(inp)
    if declared is not None and (
        len(declared) != len(shape)
        or any(d is not None and d != s for d, s in zip(declared, shape, strict=True))
    ):
        raise UsageError(
            f"input '{inp.name}' has shape {tuple(shape)}, the model declares "
            f"{['?' if d is None else d for d in declared]}"
        )
    dims = inp.type.tensor_type.shape
    del dims.dim[:]
    for s in shape:
        dims.dim.add().dim_value = int(s)


def _inputs_feeding(
    model: onnx.ModelProto, values: Sequence[str], graph_inputs: set[str]
) -> set[str]:
    """The graph inputs that `values` are computed from."""
    return sources(model.graph.node, values, graph_inputs)


prepare = LuminalBackend.prepare
run_model = LuminalBackend.run_model
run_node = LuminalBackend.run_node
supports_device = LuminalBackend.supports_device

__all__ = [
    "LuminalBackend",
    "LuminalRep",
    "prepare",
    "run_model",
    "run_node",
    "supports_device",
]
