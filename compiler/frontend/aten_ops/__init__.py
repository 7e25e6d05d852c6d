"""The ATen op table: op overload name ("aten.add.Tensor") -> lowering function,
gathered from the topic modules."""

from __future__ import annotations

from luminal.compiler.frontend.aten_ops import elementwise, nn, reduce, tensor
from luminal.compiler.frontend.aten_ops.context import (
    IR_TO_TORCH,
    TORCH_DTYPES,
    AtenContext,
    Lowering,
    Result,
    static_shape,
)
from luminal.compiler.frontend.model import merge_op_tables

OPS: dict[str, Lowering] = merge_op_tables("ATen", elementwise.OPS, nn.OPS, tensor.OPS, reduce.OPS)

__all__ = [
    "IR_TO_TORCH",
    "OPS",
    "TORCH_DTYPES",
    "AtenContext",
    "Lowering",
    "Result",
    "static_shape",
]
