"""What every frontend returns: the IR graph plus facts about the source model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from luminal.compiler.ir import Graph

T = TypeVar("T")


@dataclass(frozen=True)
class LoadedModel:
    graph: Graph
    source: str  # file path, or a description such as "torch.nn.Module MLP"
    format: str  # "onnx" | "torch"
    source_ops: Mapping[str, int] = field(default_factory=dict)  # op histogram of the source
    parameters: int = 0  # elements in the source model's weights
    opset: int | None = None
    producer: str = ""


def merge_op_tables(kind: str, *tables: Mapping[str, T]) -> dict[str, T]:
    """One op table from a frontend's topic modules; an op lowered twice is a bug."""
    merged: dict[str, T] = {}
    for table in tables:
        clash = merged.keys() & table.keys()
        if clash:
            raise RuntimeError(f"{kind} ops lowered twice: {sorted(clash)}")
        merged.update(table)
    return merged
