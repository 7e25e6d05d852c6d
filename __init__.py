"""luminal: an on-prem inference compiler.

    session = luminal.load("model.lmnl")       # verify and load a compiled artifact
    outputs = session.run({"x": x})

    from luminal.compiler.frontend.torch import from_module
    luminal.compile_model(from_module(module, (x,)), Path("model.lmnl"))  # an nn.Module

The repository root is this package; `cli/`, `compiler/`, `integrations/`, `licensing/`,
`metering/` and `references/` install as `luminal.cli`, `luminal.compiler`, ...
"""

import os
from typing import Any

# ONNX Runtime (1.29 on) records telemetry on Linux in one SQLite file under
# ~/.cache/Microsoft/DeveloperTools that every process using it shares.  luminal runs ORT
# as its oracle and baseline, often in several processes at once (bench arms, test
# workers), and an appliance for air-gapped sites must not have its baselines collect
# usage data: off unless the user sets the variable (docs/benchmarking.md).
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

from luminal._version import __version__
from luminal.compiler.runtime import Session, load
from luminal.integrations.session import InferenceSession

__all__ = ["InferenceSession", "Session", "__version__", "compile_model", "load"]


def __getattr__(name: str) -> Any:
    """`luminal.compile_model` (compiler/pipeline.py), imported on first use: it takes the
    `LoadedModel` of any frontend (`compiler.frontend.onnx.load`, `.torch.from_module`,
    `.torch.load_exported`), and `import luminal` stays light."""
    if name == "compile_model":
        from luminal.compiler.pipeline import compile_model

        return compile_model
    raise AttributeError(f"module 'luminal' has no attribute {name!r}")
