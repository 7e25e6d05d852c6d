"""Reference runtimes that outputs are checked against: ONNX Runtime and PyTorch."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from luminal.errors import UsageError

ORACLES = ("onnxruntime", "torch")


def run_oracle(
    name: str, model_path: Path, feeds: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    if name == "onnxruntime":
        return _run_onnxruntime(model_path, feeds)
    if name == "torch":
        return _run_torch(model_path, feeds)
    raise UsageError(f"unknown oracle '{name}'; choose from {', '.join(ORACLES)}")


def _run_onnxruntime(path: Path, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    if path.suffix.lower() != ".onnx":
        raise UsageError(f"{path}: ONNX Runtime compares ONNX models only; use --compare torch")
    try:
        import onnxruntime as ort
    except ImportError:
        raise UsageError(
            "onnxruntime is not installed: pip install 'luminal[onnxruntime]'"
        ) from None
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds)), strict=True))


def _run_torch(path: Path, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    if path.suffix.lower() != ".pt2":
        raise UsageError(
            f"{path}: torch compares .pt2 ExportedPrograms only; use --compare onnxruntime"
        )
    from luminal.compiler.frontend import torch as torch_frontend

    return torch_frontend.run_eager(path, feeds)
