"""Small graphs built in code for the search tests (no files, fixed seeds)."""

from __future__ import annotations

import numpy as np

from luminal.compiler.frontend.compose.contraction import matmul
from luminal.compiler.ir import DType, Graph, Op
from luminal.compiler.ir.builder import GraphBuilder


def mlp_block(layers: int = 2, width: int = 48, batch: int = 5, seed: int = 0) -> Graph:
    """x -> (matmul + bias -> relu) x layers, with weights differing per layer: the
    layers share structure, so they share kernel hashes."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    x = b.input("x", (batch, width), DType.F32)
    for _ in range(layers):
        w = b.const(
            (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), DType.F32
        )
        bias = b.const(rng.standard_normal((1, width)).astype(np.float32), DType.F32)
        y = b.binary(Op.ADD, matmul(b, x, w), b.expand(bias, (batch, width)))
        x = b.binary(
            Op.MAX, y, b.expand(b.const(np.zeros((1, 1), np.float32), DType.F32), (batch, width))
        )
    return b.build({"y": x})
