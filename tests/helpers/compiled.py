"""Compile IR graphs and run them through the CPU backend in tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import luminal
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.ir import Graph
from luminal.compiler.pipeline import CompileOptions, compile_model


def compile_and_run(
    graph: Graph, feeds: dict[str, np.ndarray], tmp: Path, **options: object
) -> dict[str, np.ndarray]:
    path = tmp / "model.lmnl"
    compile_model(LoadedModel(graph, "test", "test"), path, CompileOptions(**options))  # type: ignore[arg-type]
    return luminal.load(path).run(feeds)
