"""luminal: an on-prem inference compiler.

    session = luminal.load("model.lmnl")       # verify and load a compiled artifact
    outputs = session.run({"x": x})

    from luminal.compiler.frontend.torch import from_module
    luminal.compile_model(from_module(module, (x,)), Path("model.lmnl"))  # an nn.Module

The repository root is this package; `cli/`, `compiler/`, `integrations/`, `licensing/`,
`metering/` and `references/` install as `luminal.cli`, `luminal.compiler`, ...
"""

from typing import Any

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
