"""Reference runtimes that outputs are checked against: ONNX Runtime and PyTorch."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
    session = onnxruntime_session(path, providers=("CPUExecutionProvider",))
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds)), strict=True))


def onnxruntime_session(
    path: Path,
    *,
    providers: tuple[str, ...],
    threads: int | None = None,
    graph_optimization: str | None = None,
) -> Any:
    """An `onnxruntime.InferenceSession` on `path`; `threads` sets the intra-op pool size and
    `graph_optimization` (disable, basic, extended, all) the level; None keeps ORT's default."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise UsageError(
            "onnxruntime is not installed: pip install 'luminal[onnxruntime]'"
        ) from None
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = threads
    if graph_optimization is not None:
        levels = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }
        if graph_optimization not in levels:
            raise UsageError(
                f"graph optimization '{graph_optimization}': choose from {', '.join(levels)}"
            )
        options.graph_optimization_level = levels[graph_optimization]
    try:
        return ort.InferenceSession(str(path), options, providers=list(providers))
    except Exception as err:  # onnxruntime raises its own untyped errors
        raise UsageError(
            f"{path}: ONNX Runtime cannot load it ({' '.join(str(err).split())[:300]})"
        ) from None


def _run_torch(path: Path, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a .pt2 ExportedProgram eagerly; inputs and outputs are named as the torch
    frontend names them (the forward's argument names; output0, output1, ...)."""
    if path.suffix.lower() != ".pt2":
        raise UsageError(
            f"{path}: torch compares .pt2 ExportedPrograms only; use --compare onnxruntime"
        )
    import torch

    module, names = torch_program(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = [torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in names]
        with torch.inference_mode():
            result = module(*args)
    return torch_outputs(result)


def torch_program(path: Path) -> tuple[Any, list[str]]:
    """The eager module of a .pt2 ExportedProgram (read safely) and its user input names."""
    from torch.export.graph_signature import InputKind

    from luminal.compiler.frontend import pt2_archive

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = pt2_archive.read_exported(path)
        names = [
            s.arg.name for s in ep.graph_signature.input_specs if s.kind is InputKind.USER_INPUT
        ]
        return ep.module(), names


def torch_outputs(result: Any) -> dict[str, np.ndarray]:
    """Outputs named as the torch frontend names them: output0, output1, ..."""
    flat = result if isinstance(result, (tuple, list)) else (result,)
    return {f"output{k}": t.detach().numpy() for k, t in enumerate(flat)}
