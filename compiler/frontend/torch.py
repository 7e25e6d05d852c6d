"""PyTorch frontend: torch.export programs -> IR.

Steps, in order: export the module (`from_module`) or read a `.pt2` archive safely
(`load_exported`, see `pt2_archive`); decompose to core ATen; bind parameters, buffers
and lifted constants as IR constants and user inputs as graph inputs; lower every
`call_function` node through the ATen op table (`aten_ops`), casting each result to the
dtype torch declares for it; name the outputs.  Shapes are static.
"""

from __future__ import annotations

import collections
import operator
import os
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import torch
from torch.export.graph_signature import InputKind, OutputKind

from luminal.compiler.frontend import pt2_archive
from luminal.compiler.frontend.aten_ops import OPS, TORCH_DTYPES, AtenContext, static_shape
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.ir import GraphBuilder, Value
from luminal.errors import FrontendError, GraphError, UnsupportedOp, UsageError

__all__ = ["from_exported_program", "from_module", "load_exported", "lower"]

_WEIGHTS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def from_module(
    module: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> LoadedModel:
    """Export `module` (in eval mode) with `example_inputs` and lower it into the IR."""
    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"expected a torch.nn.Module, got {type(module).__name__}")
    name = type(module).__name__
    try:
        ep = torch.export.export(module.eval(), tuple(example_inputs), strict=False)
    except Exception as err:  # torch raises many types; the first line says what failed
        raise FrontendError(
            f"torch.export could not trace {name}: {pt2_archive.one_line(err)}"
        ) from None
    return from_exported_program(
        ep, source=f"torch.nn.Module {name}", input_names=input_names, output_names=output_names
    )


def load_exported(path: str | os.PathLike[str]) -> LoadedModel:
    """Load a `.pt2` archive written by `torch.export.save`, without unpickling anything."""
    return from_exported_program(pt2_archive.read_exported(path), source=str(path))


def from_exported_program(
    ep: torch.export.ExportedProgram,
    *,
    source: str = "torch.export.ExportedProgram",
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> LoadedModel:
    """Decompose `ep` to core ATen and lower it into the IR."""
    try:
        ep = ep.run_decompositions()
    except Exception as err:
        raise FrontendError(
            f"torch could not decompose the program to core ATen: {pt2_archive.one_line(err)}"
        ) from None
    return lower(ep, source=source, input_names=input_names, output_names=output_names)


def lower(
    ep: torch.export.ExportedProgram,
    *,
    source: str = "torch.export.ExportedProgram",
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> LoadedModel:
    """Lower `ep` as it is, without decomposing it first (its ops must all be in the
    ATen op table); `from_exported_program` is this after core-ATen decomposition."""
    return _Lowerer(ep).lower(source, input_names, output_names)


class _Lowerer:
    """Walks one decomposed program; `env` maps FX node names to Values (tuples for
    multi-result ops, Python values for constant arguments)."""

    def __init__(self, ep: torch.export.ExportedProgram) -> None:
        self.ep = ep
        self.b = GraphBuilder()
        self.env: dict[str, Any] = {}
        self.histogram: collections.Counter[str] = collections.Counter()
        self.shared: dict[tuple[Any, ...], Value] = {}  # tied weights -> one constant

    def lower(
        self, source: str, input_names: Sequence[str] | None, output_names: Sequence[str] | None
    ) -> LoadedModel:
        params = self._bind_inputs(input_names)
        outputs = None
        for node in self.ep.graph.nodes:
            if node.op == "call_function":
                with self.b.origin((node.name,)):  # provenance: the FX node's name
                    self._call(node)
            elif node.op == "get_attr":
                raise UnsupportedOp(
                    "submodules and subgraphs (control flow) are not supported", node=node.name
                )
            elif node.op == "output":
                outputs = self._outputs(node, output_names)
        assert outputs is not None
        return LoadedModel(
            graph=self.b.build(outputs),
            source=source,
            format="torch",
            source_ops=dict(sorted(self.histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
            parameters=params,
            opset=None,
            producer=f"torch {torch.__version__}",
        )

    # ---- inputs and outputs ----------------------------------------------------------------
    def _bind_inputs(self, input_names: Sequence[str] | None) -> int:
        """Bind every placeholder; returns the number of parameter and buffer elements."""
        specs = {spec.arg.name: spec for spec in self.ep.graph_signature.input_specs}
        placeholders = [n for n in self.ep.graph.nodes if n.op == "placeholder"]
        users = [n for n in placeholders if specs[n.name].kind is InputKind.USER_INPUT]
        tensors = [n for n in users if isinstance(n.meta.get("val"), torch.Tensor)]
        names = list(input_names) if input_names is not None else [n.name for n in tensors]
        if len(names) != len(tensors):
            raise UsageError(
                f"{len(names)} input names given for {len(tensors)} tensor inputs "
                f"({', '.join(n.name for n in tensors)})"
            )
        given = dict(zip((n.name for n in tensors), names, strict=True))
        params, counted = 0, set()
        for node in placeholders:
            spec = specs[node.name]
            if spec.kind is InputKind.USER_INPUT:
                val = node.meta.get("val")
                if isinstance(val, torch.Tensor):
                    shape = static_shape(val.shape, what=f" of input '{given[node.name]}'")
                    dtype = self._dtype(val.dtype, f"input '{given[node.name]}'")
                    self.env[node.name] = self.b.input(given[node.name], shape, dtype)
                else:
                    self.env[node.name] = getattr(spec.arg, "value", val)
            elif spec.kind in _WEIGHTS:
                tensor = self._weight(spec)
                key = _storage_key(tensor)
                if spec.kind is not InputKind.CONSTANT_TENSOR and key not in counted:
                    counted.add(key)
                    params += tensor.numel()
                if node.users:
                    if key not in self.shared:
                        self.shared[key] = self.b.const(
                            _numpy(tensor, spec.target), name=spec.target
                        )
                    self.env[node.name] = self.shared[key]
            else:
                raise UnsupportedOp(f"graph input '{node.name}' of kind {spec.kind.name}")
        return params

    def _weight(self, spec: Any) -> torch.Tensor:
        found = self.ep.state_dict.get(spec.target)
        if found is None:
            found = self.ep.constants.get(spec.target)
        if not isinstance(found, torch.Tensor):
            raise UnsupportedOp(f"'{spec.target}' is not a plain tensor ({type(found).__name__})")
        if found.device.type == "meta":
            raise FrontendError(f"'{spec.target}' has no data (meta device)")
        return found

    def _outputs(self, node: torch.fx.Node, output_names: Sequence[str] | None) -> dict[str, Value]:
        specs = self.ep.graph_signature.output_specs
        for spec in specs:
            if spec.kind is not OutputKind.USER_OUTPUT:
                raise UnsupportedOp(
                    f"the program updates '{spec.target}' ({spec.kind.name}): mutating buffers "
                    "or inputs is not supported (is the module in eval mode?)"
                )
        args = list(node.args[0])
        names = (
            list(output_names)
            if output_names is not None
            else [f"output{k}" for k in range(len(args))]
        )
        if len(names) != len(args):
            raise UsageError(f"{len(names)} output names given for {len(args)} outputs")
        outputs = {}
        for name, arg in zip(names, args, strict=True):
            value = self.env.get(arg.name) if isinstance(arg, torch.fx.Node) else arg
            if isinstance(value, bool | int | float):
                value = self.b.const(value)
            if not isinstance(value, Value):
                raise UnsupportedOp(f"output '{name}' is not a tensor ({type(value).__name__})")
            outputs[name] = value
        return outputs

    # ---- nodes -------------------------------------------------------------------------------
    def _call(self, node: torch.fx.Node) -> None:
        if node.target is operator.getitem:
            self._getitem(node)
            return
        if not isinstance(node.target, torch._ops.OpOverload):
            raise UnsupportedOp("not supported", op=_op_name(node.target), node=node.name)
        op = str(node.target)
        self.histogram[op] += 1
        lowering = OPS.get(op)
        if lowering is None:
            raise UnsupportedOp("not supported", op=op, node=node.name)
        ctx = AtenContext(self.b, node, op, self._arguments(node, op))
        try:
            result = lowering(ctx)
            self.env[node.name] = self._conform(ctx, result)
        except GraphError as err:
            raise FrontendError(str(err), op=op, node=node.name) from None

    def _getitem(self, node: torch.fx.Node) -> None:
        source, index = node.args
        values = self.env.get(source.name)
        op = _op_name(source.target)
        if not isinstance(values, tuple) or not isinstance(index, int) or index >= len(values):
            raise FrontendError(
                f"cannot take item {index!r} of '{source.name}'", op=op, node=node.name
            )
        if values[index] is None:
            raise UnsupportedOp(
                f"result {index} of this op is not supported", op=op, node=source.name
            )
        self.env[node.name] = values[index]

    def _arguments(self, node: torch.fx.Node, op: str) -> dict[str, Any]:
        """The node's arguments by schema name, defaults filled in, FX nodes resolved."""
        schema = node.target._schema  # type: ignore[union-attr]
        args: dict[str, Any] = {}
        for k, a in enumerate(schema.arguments):
            if k < len(node.args) and not a.kwarg_only:
                args[a.name] = node.args[k]
            elif a.name in node.kwargs:
                args[a.name] = node.kwargs[a.name]
            elif a.has_default_value():
                args[a.name] = a.default_value
        return {name: self._resolve(value, op, node) for name, value in args.items()}

    def _resolve(self, value: Any, op: str, node: torch.fx.Node) -> Any:
        if isinstance(value, torch.fx.Node):
            return self.env[value.name]
        if isinstance(value, list | tuple):
            return [self._resolve(v, op, node) for v in value]
        if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
            raise UnsupportedOp(
                "symbolic sizes are not supported (static shapes only)", op=op, node=node.name
            )
        return value

    def _conform(self, ctx: AtenContext, result: Any) -> Any:
        """Cast each result to the dtype torch declares and check its shape."""
        if result is None:
            return None
        if isinstance(result, Value):
            return self._conform_one(ctx, result, ctx.out_meta())
        return tuple(
            None if r is None else self._conform_one(ctx, r, ctx.out_meta(k))
            for k, r in enumerate(result)
        )

    def _conform_one(self, ctx: AtenContext, value: Value, meta: Any) -> Value:
        if not isinstance(meta, torch.Tensor):
            return value
        shape = static_shape(meta.shape, ctx)
        if value.shape != shape:
            raise ctx.error(f"lowered to shape {value.shape}, torch says {shape} (a frontend bug)")
        return self.b.cast(value, ctx.dtype(meta.dtype))

    def _dtype(self, dtype: torch.dtype, what: str) -> Any:
        found = TORCH_DTYPES.get(dtype)
        if found is None:
            raise UnsupportedOp(f"{what} has element type {dtype}, which is not supported")
        return found


def _op_name(target: Any) -> str:
    return (
        str(target)
        if isinstance(target, torch._ops.OpOverload)
        else getattr(target, "__name__", str(target))
    )


def _storage_key(t: torch.Tensor) -> tuple[Any, ...]:
    """Tensors viewing the same memory the same way (tied weights) share one key."""
    return (t.untyped_storage().data_ptr(), t.storage_offset(), t.dtype, t.shape, t.stride())


def _numpy(t: torch.Tensor, name: str) -> np.ndarray:
    """A private numpy copy of a weight (the module may change after lowering)."""
    if t.dtype not in TORCH_DTYPES:
        raise UnsupportedOp(f"weight '{name}' has element type {t.dtype}, which is not supported")
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.numpy().copy()
