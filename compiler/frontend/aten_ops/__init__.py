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


def _merge(*tables: dict[str, Lowering]) -> dict[str, Lowering]:
    merged: dict[str, Lowering] = {}
    for table in tables:
        clash = merged.keys() & table.keys()
        if clash:
            raise RuntimeError(f"ATen ops lowered twice: {sorted(clash)}")
        merged.update(table)
    return merged


OPS: dict[str, Lowering] = _merge(elementwise.OPS, nn.OPS, tensor.OPS, reduce.OPS)

__all__ = [
    "IR_TO_TORCH",
    "OPS",
    "TORCH_DTYPES",
    "AtenContext",
    "Lowering",
    "Result",
    "static_shape",
]
