"""Running an artifact built for a target other than the CPU: the backend that built it
(found by the name its manifest records) loads it, and this wraps what it returns in the
same interface as a CPU `Session`: `inputs`, `outputs`, `manifest`, `run(feeds)`.

A backend raises `ArtifactIncompatible` from `load` when its device is not here; one
that is not installed, or fails in a way it did not foresee, gets the same one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from luminal.compiler.artifact import Artifact
from luminal.compiler.backends.protocol import Backend, Executable
from luminal.compiler.backends.registry import Registry
from luminal.compiler.ir import DType, TensorSpec
from luminal.errors import ArtifactIncompatible, CompilerError, LuminalError, UsageError, one_line


class BackendSession:
    def __init__(
        self, path: Path, manifest: Mapping[str, Any], exe: Executable, backend: Backend
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.backend = backend
        self.executable = exe
        self.inputs = tuple(_spec(s) for s in manifest["inputs"])
        self.outputs = tuple(_spec(s) for s in manifest["outputs"])

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        from luminal.compiler.runtime.session import check_inputs

        feeds = check_inputs(self.inputs, inputs)
        named = {s.name: a for s, a in zip(self.inputs, feeds, strict=True)}
        try:
            return dict(self.executable.run(named))
        except LuminalError:
            raise
        except Exception as err:
            raise CompilerError(
                f"{self.path}: the '{self.backend.name}' backend failed while running: {one_line(err)}"
            ) from None


def open_with_backend(
    file: Path, art: Artifact, registry: Registry | None = None
) -> BackendSession:
    target = art.manifest.get("target", {})
    kind, name = target.get("kind"), target.get("backend")
    if not name:
        raise ArtifactIncompatible(f"{file}: built for target '{kind}' but names no backend")
    try:
        backend = (registry or Registry.installed()).get(name)
    except UsageError as err:
        raise ArtifactIncompatible(f"{file}: built for '{name}' ({kind}); {err}") from None
    try:
        exe = backend.load(art.manifest, art.members)
    except ArtifactIncompatible as err:  # the backend's reason, with the file it is about
        raise ArtifactIncompatible(f"{file}: {err}") from None
    except LuminalError:
        raise
    except Exception as err:
        raise ArtifactIncompatible(
            f"{file}: the '{name}' backend cannot load it here: {one_line(err)}"
        ) from None
    return BackendSession(file, art.manifest, exe, backend)


def _spec(data: Mapping[str, Any]) -> TensorSpec:
    return TensorSpec(data["name"], tuple(data["shape"]), DType(data["dtype"]))
