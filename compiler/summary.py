"""What `luminal inspect` reports about a loaded model; every number is in `to_json()`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.ir import TensorSpec
from luminal.compiler.ir.analysis import flops


@dataclass(frozen=True)
class ModelSummary:
    source: str
    format: str
    producer: str
    opset: int | None
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    parameters: int
    source_ops: Mapping[str, int]
    ir_nodes: int
    ir_ops: Mapping[str, int]
    flops: int
    constant_bytes: int

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
            "ir": {
                "nodes": self.ir_nodes,
                "ops": dict(self.ir_ops),
                "flops": self.flops,
                "constant_bytes": self.constant_bytes,
            },
        }


def summarize(model: LoadedModel) -> ModelSummary:
    g = model.graph
    return ModelSummary(
        source=model.source,
        format=model.format,
        producer=model.producer,
        opset=model.opset,
        inputs=g.input_specs(),
        outputs=g.output_specs(),
        parameters=model.parameters,
        source_ops=model.source_ops,
        ir_nodes=len(g.nodes),
        ir_ops=g.op_histogram(),
        flops=flops(g),
        constant_bytes=g.const_bytes(),
    )


def _spec(spec: TensorSpec) -> dict[str, object]:
    return {"name": spec.name, "shape": list(spec.shape), "dtype": spec.dtype.value}
