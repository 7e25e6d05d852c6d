"""What an ATen op's lowering function sees: the FX node and its arguments by name.

Arguments are normalised against the op's schema, so a lowering reads `ctx.arg("dim")`
whether the graph passed it by position, by keyword or not at all (the default).  Tensor
arguments arrive as IR Values; Python numbers stay numbers until `operand` turns them
into constants of the dtype the computation needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from luminal.compiler.ir import DType, GraphBuilder, Shape, Value
from luminal.errors import FrontendError, UnsupportedOp

TORCH_DTYPES: dict[torch.dtype, DType] = {
    torch.float64: DType.F64,
    torch.float32: DType.F32,
    torch.float16: DType.F16,
    torch.bfloat16: DType.BF16,
    torch.int64: DType.I64,
    torch.int32: DType.I32,
    torch.int16: DType.I16,
    torch.int8: DType.I8,
    torch.uint8: DType.U8,
    torch.bool: DType.BOOL,
}
IR_TO_TORCH: dict[DType, torch.dtype] = {v: k for k, v in TORCH_DTYPES.items()}

#: Float types that torch computes in float32 ("opmath") before rounding the result.
_LOW_PRECISION = (DType.F16, DType.BF16)


@dataclass
class AtenContext:
    """One FX node being lowered, with its arguments normalised by the op's schema."""

    b: GraphBuilder
    node: torch.fx.Node
    op: str  # "aten.add.Tensor"
    args: dict[str, Any]

    @property
    def name(self) -> str:
        return self.node.name

    # ---- arguments -----------------------------------------------------------------------
    def arg(self, name: str, default: Any = None) -> Any:
        value = self.args.get(name, default)
        return default if value is None else value

    def tensor(self, name: str) -> Value:
        value = self.args.get(name)
        if not isinstance(value, Value):
            raise self.error(f"argument '{name}' must be a tensor, got {type(value).__name__}")
        return value

    def optional(self, name: str) -> Value | None:
        value = self.args.get(name)
        return value if isinstance(value, Value) else None

    def tensors(self, name: str) -> list[Value]:
        values = self.args.get(name) or []
        if not all(isinstance(v, Value) for v in values):
            raise self.error(f"argument '{name}' must be a list of tensors")
        return list(values)

    def ints(self, name: str, default: Sequence[int] = ()) -> list[int]:
        value = self.args.get(name)
        if value is None:
            return list(default)
        if isinstance(value, int):
            return [value]
        return [int(v) for v in value]

    def operand(self, name: str, dtype: DType) -> Value:
        """A tensor or Python-number argument as a Value of `dtype`."""
        return self.as_value(self.args.get(name), dtype, name)

    def as_value(self, value: Any, dtype: DType, what: str = "operand") -> Value:
        if isinstance(value, Value):
            return self.b.cast(value, dtype)
        if isinstance(value, bool | int | float):
            return self.b.const(value, dtype)
        raise self.error(f"argument '{what}' must be a tensor or a number, got {value!r}")

    # ---- what torch says the result is --------------------------------------------------
    def out_meta(self, index: int = 0) -> Any:
        val = self.node.meta.get("val")
        if isinstance(val, list | tuple):
            val = val[index]
        return val

    @property
    def out_dtype(self) -> DType:
        val = self.out_meta()
        if not isinstance(val, torch.Tensor):
            raise self.error("the node has no tensor result metadata")
        return self.dtype(val.dtype)

    @property
    def out_shape(self) -> Shape:
        val = self.out_meta()
        if not isinstance(val, torch.Tensor):
            raise self.error("the node has no tensor result metadata")
        return static_shape(val.shape, self)

    def compute_dtype(self) -> DType:
        """The float type torch does this op's math in: the result type, widened to
        float32 for float16 / bfloat16 (torch's "opmath")."""
        dt = self.out_dtype
        if dt in _LOW_PRECISION:
            return DType.F32
        return dt if dt.is_float else DType.F32

    def dtype(self, dtype: Any) -> DType:
        found = TORCH_DTYPES.get(dtype) if isinstance(dtype, torch.dtype) else None
        if found is None:
            raise self.unsupported(f"element type {dtype} is not supported")
        return found

    # ---- errors ---------------------------------------------------------------------------
    def unsupported(self, message: str) -> UnsupportedOp:
        return UnsupportedOp(message, op=self.op, node=self.name)

    def error(self, message: str) -> FrontendError:
        return FrontendError(message, op=self.op, node=self.name)


def static_shape(shape: Sequence[Any], ctx: AtenContext | None = None, what: str = "") -> Shape:
    """A torch.Size as a tuple of ints; symbolic dims are not supported (yet)."""
    dims = []
    for d in shape:
        if not isinstance(d, int):
            message = (
                f"symbolic shape {list(shape)}{what}: only static shapes are supported; "
                "export without dynamic_shapes"
            )
            if ctx is not None:
                raise ctx.unsupported(message)
            raise UnsupportedOp(message)
        dims.append(int(d))
    return tuple(dims)


Result = Value | Sequence[Value | None] | None
Lowering = Callable[[AtenContext], Result]
