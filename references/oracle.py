"""The oracle of `luminal run --compare`: one run of a registered baseline, for reference
outputs rather than time.

    run_oracle("onnxruntime", Path("model.onnx"), feeds)  -> {"y": array, ...}

An oracle is an entry of the baselines registry (`references.baselines`), opened so that
its answer is a reference: ONNX Runtime on its CPU provider only (a GPU provider's TF32 or
fused kernels would make the reference depend on the machine) and every runtime at its own
thread default (one run: its speed does not matter).  Only the model's own runtime is an
oracle: ONNX Runtime for an .onnx file, PyTorch eager for a .pt2 ExportedProgram; a
compiler such as torch.compile or TVM is a baseline to beat, not a reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from luminal.errors import UsageError
from luminal.references import baselines

#: Oracle name -> the baseline settings that make its run a reference.
_SETTINGS: Mapping[str, Mapping[str, str]] = {
    "onnxruntime": {"providers": "CPUExecutionProvider"},
    "torch": {},
}
ORACLES = tuple(_SETTINGS)

#: What to say when the model file is not one the oracle runs.
_OTHER_FORMAT = {
    "onnxruntime": "ONNX Runtime compares ONNX models only; use --compare torch",
    "torch": "torch compares .pt2 ExportedPrograms only; use --compare onnxruntime",
}


def run_oracle(
    name: str, model_path: Path, feeds: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The outputs of oracle `name` on `model_path` for `feeds`, named as luminal names them."""
    if name not in _SETTINGS:
        raise UsageError(f"unknown oracle '{name}'; choose from {', '.join(ORACLES)}")
    baseline = baselines.get(name)
    if model_path.suffix.lower() not in baseline.formats:
        raise UsageError(f"{model_path}: {_OTHER_FORMAT[name]}")
    runner = baseline.open(model_path, baselines.BaselineOptions(None, _SETTINGS[name]))
    return runner(feeds)
