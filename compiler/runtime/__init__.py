"""Runtime: load a verified artifact and run it; one native call per inference."""

from luminal.compiler.runtime.session import Session, load

__all__ = ["Session", "load"]
