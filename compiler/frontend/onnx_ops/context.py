"""What an ONNX op's lowering function sees: the node, its inputs, attributes, opset."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from luminal.compiler.frontend.coverage import Reason, Refusal
from luminal.compiler.ir import DType, GraphBuilder, Value
from luminal.compiler.ir.dtypes import ONNX_DTYPES
from luminal.errors import FrontendError, UnsupportedOp


class DataDependent(Refusal):
    """An input the lowering needs as a constant (a shape, axes, pads, ...) is computed at
    run time.  `values` name the ONNX values, so a caller that knows the graph inputs'
    values (the ONNX backend) can bind the inputs they derive from and compile again."""

    def __init__(self, message: str, *, values: tuple[str, ...], **where: Any) -> None:
        super().__init__(Reason.DATA_DEPENDENT, message, **where)
        self.values = values


@dataclass
class NodeContext:
    """One node being lowered.  Attributes are read through `attr`, which records them:
    an attribute the lowering never read is reported as unsupported, not ignored."""

    b: GraphBuilder
    node: onnx.NodeProto
    inputs: list[Value | None]
    opset: int
    #: f16 or bf16 when the node's inputs were widened to f32 for computing (see `round`).
    narrow: DType | None = None
    _read: set[str] = field(default_factory=set)

    @property
    def op(self) -> str:
        return self.node.op_type

    @property
    def name(self) -> str:
        return self.node.name or (self.node.output[0] if self.node.output else "")

    def attr(self, name: str, default: Any = None) -> Any:
        self._read.add(name)
        for a in self.node.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
                if isinstance(value, onnx.TensorProto):
                    return numpy_helper.to_array(value)
                if isinstance(value, bytes):
                    return value.decode()
                if isinstance(value, list) and value and isinstance(value[0], bytes):
                    return [v.decode() for v in value]
                return value
        return default

    def has_attr(self, name: str) -> bool:
        return any(a.name == name for a in self.node.attribute)

    def unread_attrs(self) -> list[str]:
        return [a.name for a in self.node.attribute if a.name not in self._read]

    def input(self, i: int) -> Value:
        v = self.inputs[i] if i < len(self.inputs) else None
        if v is None:
            raise self.error(f"input {i} is required")
        return v

    def optional(self, i: int) -> Value | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def const(self, i: int, what: str) -> np.ndarray | None:
        """The value of optional input i, which must be constant after folding."""
        v = self.optional(i)
        if v is None:
            return None
        value = self.b.const_value(v)
        if value is None:
            raise DataDependent(
                f"input '{what}' must be a constant (data-dependent {what} is not supported)",
                values=(self.node.input[i],),
                op=self.op,
                node=self.name,
                opset=self.opset,
            )
        return value

    def ints(self, i: int, what: str) -> list[int] | None:
        value = self.const(i, what)
        return None if value is None else [int(x) for x in np.asarray(value).reshape(-1)]

    def dtype(self, onnx_type: int) -> DType:
        dt = ONNX_DTYPES.get(int(onnx_type))
        if dt is None:
            name = onnx.TensorProto.DataType.Name(int(onnx_type))
            raise Refusal(
                Reason.ELEMENT_TYPE,
                f"element type {name} is not supported",
                op=self.op,
                node=self.name,
                opset=self.opset,
            )
        return dt

    def round(self, v: Value) -> Value:
        """Round an f32 intermediate to the node's narrow input type and back, where the
        op's definition computes in that type (a no-op for f32 and f64 inputs)."""
        if self.narrow is None or v.dtype is not DType.F32:
            return v
        return self.b.cast(self.b.cast(v, self.narrow), DType.F32)

    def unsupported(self, message: str) -> UnsupportedOp:
        return UnsupportedOp(message, op=self.op, node=self.name, opset=self.opset)

    def error(self, message: str) -> FrontendError:
        return FrontendError(message, op=self.op, node=self.name, opset=self.opset)


Lowering = Callable[[NodeContext], Sequence[Value | None]]
