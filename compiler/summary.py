"""What `luminal inspect` reports about a model; every number is in `to_json()`.

A model with unsupported ops still has a summary: its inputs, outputs and op coverage; the
IR facts (nodes, FLOPs, constants) are None because no IR graph was built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from luminal.compiler.frontend.coverage import Coverage
from luminal.compiler.frontend.model import Analysis
from luminal.compiler.ir import TensorSpec
from luminal.compiler.ir.analysis import flops


@dataclass(frozen=True)
class IrFacts:
    nodes: int
    ops: Mapping[str, int]
    flops: int
    constant_bytes: int

    def to_json(self) -> dict[str, object]:
        return {
            "nodes": self.nodes,
            "ops": dict(self.ops),
            "flops": self.flops,
            "constant_bytes": self.constant_bytes,
        }


@dataclass(frozen=True)
class ModelSummary:
    source: str
    format: str
    producer: str
    opset: int | None
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]  # those computed (all of them when `ir` is set)
    parameters: int
    source_ops: Mapping[str, int]
    coverage: Coverage
    ir: IrFacts | None  # None when the model has unsupported ops

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "format": self.format,
            "producer": self.producer,
            "opset": self.opset,
            "inputs": [_spec(s) for s in self.inputs],
            "outputs": [_spec(s) for s in self.outputs],
            "parameters": self.parameters,
            "source_ops": dict(self.source_ops),
            "ir": None if self.ir is None else self.ir.to_json(),
            "coverage": self.coverage.to_json(),
        }


def summarize(analysis: Analysis) -> ModelSummary:
    ir = None
    if analysis.model is not None:
        g = analysis.model.graph
        ir = IrFacts(
            nodes=len(g.nodes), ops=g.op_histogram(), flops=flops(g), constant_bytes=g.const_bytes()
        )
    return ModelSummary(
        source=analysis.source,
        format=analysis.format,
        producer=analysis.producer,
        opset=analysis.opset,
        inputs=analysis.inputs,
        outputs=analysis.outputs,
        parameters=analysis.parameters,
        source_ops=analysis.source_ops,
        coverage=analysis.coverage,
        ir=ir,
    )


def _spec(spec: TensorSpec) -> dict[str, object]:
    return {"name": spec.name, "shape": list(spec.shape), "dtype": spec.dtype.value}
