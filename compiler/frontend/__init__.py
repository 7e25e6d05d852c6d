"""Frontends: source models -> IR.  `load_model` picks one by file type.

ONNX files (`.onnx`) go to `frontend.onnx`; ExportedProgram archives written by
`torch.export.save` (`.pt2`) go to `frontend.torch`.  Pickled PyTorch files are refused:
unpickling runs arbitrary code.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path

from luminal.compiler.frontend.model import Analysis, LoadedModel
from luminal.errors import ModelLoadError, UsageError

PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".bin", ".ckpt", ".tar")

EXPORT_HINT = (
    "export it instead: ep = torch.export.export(model.eval(), example_args); "
    "torch.export.save(ep, 'model.pt2') -- or torch.onnx.export(model, example_args, 'model.onnx')"
)


def load_model(path: str | os.PathLike[str], dims: Mapping[str, int] | None = None) -> LoadedModel:
    """Load the model file at `path` into the IR."""
    file = _model_file(path)
    if file.suffix.lower() == ".pt2":
        from luminal.compiler.frontend import torch as torch_frontend

        with warnings.catch_warnings():  # torch's deprecation chatter is not the user's concern
            warnings.simplefilter("ignore")
            return torch_frontend.load_exported(file)
    from luminal.compiler.frontend import onnx as onnx_frontend

    return onnx_frontend.load(file, dims)


def analyze_model(path: str | os.PathLike[str], dims: Mapping[str, int] | None = None) -> Analysis:
    """What `inspect` shows: an ONNX model is analyzed op by op even when some ops are
    unsupported; a .pt2 program is loaded (its frontend stops at the first unsupported op)."""
    file = _model_file(path)
    if file.suffix.lower() == ".onnx":
        from luminal.compiler.frontend import onnx as onnx_frontend

        return onnx_frontend.analyze_file(file, dims)
    return Analysis.of(load_model(file, dims))


def _model_file(path: str | os.PathLike[str]) -> Path:
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        raise ModelLoadError(
            file,
            f"refusing to unpickle a '{suffix}' file (unpickling can run arbitrary code); {EXPORT_HINT}",
        )
    if not file.exists():
        raise UsageError(f"{file}: no such model file")
    if suffix not in (".pt2", ".onnx"):
        raise ModelLoadError(
            file, f"unknown model type '{suffix or '(none)'}'; expected .onnx or .pt2"
        )
    return file


__all__ = ["Analysis", "LoadedModel", "analyze_model", "load_model"]
