"""Compile a lowered model to a loaded `Session` in one call, without leaving files behind.

The artifact is written to a private temporary folder and loaded (which verifies it and
copies the library out), then the folder is removed; the session keeps running.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.compiler.runtime import Session, load


def compile_to_session(
    model: LoadedModel, options: CompileOptions | None = None, keep: Path | None = None
) -> Session:
    """Compile `model` and load it.  `keep`: also leave the artifact at this path."""
    options = options or CompileOptions()
    if keep is not None:
        compile_model(model, keep, options)
        return load(keep)
    with tempfile.TemporaryDirectory(prefix="luminal-session-") as tmp:
        path = Path(tmp) / "model.lmnl"
        compile_model(model, path, options)
        return load(path)
