"""The ONNX op table: op type -> lowering function, gathered from the topic modules."""

from __future__ import annotations

from luminal.compiler.frontend.model import merge_op_tables
from luminal.compiler.frontend.onnx_ops import (
    activation,
    attention,
    domains,
    elementwise,
    extra,
    indexing,
    loss,
    nn,
    norms,
    quant,
    quant_ms,
    recurrent,
    reduce,
    resize,
    sampling,
    signal,
    tensor,
)
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext

OPS: dict[str, Lowering] = merge_op_tables(
    "ONNX",
    elementwise.OPS,
    activation.OPS,
    nn.OPS,
    tensor.OPS,
    reduce.OPS,
    indexing.OPS,
    norms.OPS,
    attention.OPS,
    loss.OPS,
    resize.OPS,
    quant.OPS,
    signal.OPS,
    recurrent.OPS,
    extra.OPS,
    sampling.OPS,
)

#: ops of other domains (ai.onnx.ml, ai.onnx.preview.training, com.microsoft), by (domain, op type)
DOMAIN_OPS: dict[tuple[str, str], Lowering] = {**domains.DOMAIN_OPS, **quant_ms.DOMAIN_OPS}

__all__ = ["DOMAIN_OPS", "OPS", "Lowering", "NodeContext"]
