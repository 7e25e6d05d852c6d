"""The ONNX op table: op type -> lowering function, gathered from the topic modules."""

from __future__ import annotations

from luminal.compiler.frontend.onnx_ops import elementwise, nn, reduce, tensor
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext


def _merge(*tables: dict[str, Lowering]) -> dict[str, Lowering]:
    merged: dict[str, Lowering] = {}
    for table in tables:
        clash = merged.keys() & table.keys()
        if clash:
            raise RuntimeError(f"ONNX ops lowered twice: {sorted(clash)}")
        merged.update(table)
    return merged


OPS: dict[str, Lowering] = _merge(elementwise.OPS, nn.OPS, tensor.OPS, reduce.OPS)

__all__ = ["OPS", "Lowering", "NodeContext"]
