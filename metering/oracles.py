"""Reference runtimes that outputs are checked against: ONNX Runtime and PyTorch."""

from __future__ import annotations

import warnings
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
    """Run a .pt2 ExportedProgram eagerly; inputs and outputs are named as the torch
    frontend names them (the forward's argument names; output0, output1, ...)."""
    if path.suffix.lower() != ".pt2":
        raise UsageError(
            f"{path}: torch compares .pt2 ExportedPrograms only; use --compare onnxruntime"
        )
    import torch
    from torch.export.graph_signature import InputKind

    from luminal.compiler.frontend import pt2_archive

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = pt2_archive.read_exported(path)
        names = [
            s.arg.name for s in ep.graph_signature.input_specs if s.kind is InputKind.USER_INPUT
        ]
        args = [torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in names]
        with torch.inference_mode():
            result = ep.module()(*args)
    flat = result if isinstance(result, (tuple, list)) else (result,)
    return {f"output{k}": t.detach().numpy() for k, t in enumerate(flat)}
