"""luminal: an on-prem inference compiler.

The repository root is this package; `cli/`, `compiler/`, `licensing/` and `metering/`
install as `luminal.cli`, `luminal.compiler`, ...
"""

from luminal._version import __version__

__all__ = ["__version__"]
