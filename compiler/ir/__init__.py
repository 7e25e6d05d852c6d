"""The IR: a small primitive vocabulary over static shapes, and its reference semantics."""

from luminal.compiler.ir.builder import GraphBuilder, Value
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.graph import Graph, Node, Shape, TensorSpec, format_graph, numel
from luminal.compiler.ir.ops import Op

__all__ = [
    "DType",
    "Graph",
    "GraphBuilder",
    "Node",
    "Op",
    "Shape",
    "TensorSpec",
    "Value",
    "format_graph",
    "numel",
]
