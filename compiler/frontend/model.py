"""What every frontend returns: the IR graph plus facts about the source model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from luminal.compiler.frontend.coverage import Coverage, OpCoverage, OpKind, OpStatus
from luminal.compiler.ir import Graph, TensorSpec

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


@dataclass(frozen=True)
class Analysis:
    """What `luminal inspect` knows of a model that may not lower: the source's facts, the
    inputs and outputs that lowered, op coverage, and the IR model when nothing is refused."""

    source: str
    format: str
    producer: str
    opset: int | None
    parameters: int
    source_ops: Mapping[str, int]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    coverage: Coverage
    model: LoadedModel | None = None

    @classmethod
    def of(cls, model: LoadedModel) -> Analysis:
        """A model its frontend loaded: every op kind it has is supported."""
        ops = tuple(
            OpCoverage(OpKind("", op, model.opset), count, OpStatus.SUPPORTED, ())
            for op, count in sorted(model.source_ops.items())
        )
        return cls(
            source=model.source,
            format=model.format,
            producer=model.producer,
            opset=model.opset,
            parameters=model.parameters,
            source_ops=model.source_ops,
            inputs=model.graph.input_specs(),
            outputs=model.graph.output_specs(),
            coverage=Coverage(ops),
            model=model,
        )


def merge_op_tables(kind: str, *tables: Mapping[str, T]) -> dict[str, T]:
    """One op table from a frontend's topic modules; an op lowered twice is a bug."""
    merged: dict[str, T] = {}
    for table in tables:
        clash = merged.keys() & table.keys()
        if clash:
            raise RuntimeError(f"{kind} ops lowered twice: {sorted(clash)}")
        merged.update(table)
    return merged
