"""luminal: an on-prem inference compiler.

    session = luminal.load("model.lmnl")       # verify and load a compiled artifact
    outputs = session.run({"x": x})

The repository root is this package; `cli/`, `compiler/`, `integrations/`, `licensing/`,
`metering/` and `references/` install as `luminal.cli`, `luminal.compiler`, ...
"""

from luminal._version import __version__
from luminal.compiler.runtime import Session, load
from luminal.integrations.session import InferenceSession

__all__ = ["InferenceSession", "Session", "__version__", "load"]
