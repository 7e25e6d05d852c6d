"""What `luminal run` executes: a compiled artifact, a model compiled on the fly, or the
reference interpreter."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from luminal.compiler.frontend import load_model
from luminal.compiler.ir import Graph, TensorSpec, interpreter
from luminal.compiler.pipeline import compile_model
from luminal.compiler.runtime import Session, load
from luminal.errors import UsageError


@dataclass(frozen=True)
class Engine:
    name: str  # "compiled" | "reference"
    inputs: tuple[TensorSpec, ...]
    source: Path  # the model file an oracle should run
    _runner: Any
    precision: str = "fp32"  # what an artifact was built at (its manifest's options)

    @staticmethod
    def open(
        path: Path, dims: Mapping[str, int], reference: bool, trust_unsigned: bool = False
    ) -> Engine:
        if path.suffix.lower() == ".lmnl":
            if reference:
                raise UsageError("--reference runs a model file; an artifact is already compiled")
            session = load(path, trust_unsigned=trust_unsigned)
            source, built = Path(session.manifest.source.path), session.manifest.options
            return Engine(
                "compiled", session.inputs, source, session, str(built.get("precision", "fp32"))
            )
        model = load_model(path, dims)
        if reference:
            return Engine("reference", model.graph.input_specs(), path, model.graph)
        with tempfile.TemporaryDirectory(prefix="luminal-run-") as tmp:
            artifact = Path(tmp) / "model.lmnl"
            compile_model(model, artifact)
            session = load(artifact)
        return Engine("compiled", session.inputs, path, session)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if isinstance(self._runner, Graph):
            return interpreter.run(self._runner, feeds)
        assert isinstance(self._runner, Session)
        return self._runner.run(feeds)
