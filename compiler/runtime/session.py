"""`luminal.load(path)` -> Session; `Session.run(inputs)` -> outputs.

Loading verifies the artifact's signature against this install's trusted keys, every
member's size and hash and the manifest's fields and bounds (`artifact.read_artifact`);
an unsigned or untrusted artifact is refused unless the caller passes
`trust_unsigned=True`.  Then it hands the artifact to the backend that built it (found by the name its manifest
records, in the registry of built-ins and plugins), whose `load` checks that it can run
here (the CPU's features, the GPU's kind) before any code is mapped.  A Session is that
backend's executable with the artifact's path, manifest and specs beside it; a backend's
unforeseen failure while loading or running is one line, never a traceback.

Sessions are safe to use from many threads (the CPU takes an arena per call from a
pool; the Triton backends serialize runs on their static buffers).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from luminal.compiler.artifact import Artifact, Manifest, read_artifact
from luminal.compiler.backends.protocol import Backend, Executable
from luminal.compiler.backends.registry import Registry
from luminal.compiler.ir.graph import check_feeds
from luminal.errors import (
    ArtifactIncompatible,
    CompilerError,
    IntegrityError,
    LuminalError,
    UsageError,
    one_line,
)


class Session:
    def __init__(self, path: Path, manifest: Manifest, exe: Executable, backend: Backend) -> None:
        self.path = path
        self.manifest = manifest
        self.backend = backend
        self.executable = exe
        self.inputs = manifest.inputs
        self.outputs = manifest.outputs
        self._run = exe.run

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            return self._run(inputs)
        except LuminalError:
            raise
        except Exception as err:
            check_feeds(self.inputs, inputs)  # the caller's mistake, if it was one: one line
            raise CompilerError(
                f"{self.path}: the '{self.backend.name}' backend failed while running: {one_line(err)}"
            ) from None


def load(
    path: str | os.PathLike[str],
    registry: Registry | None = None,
    *,
    trust_unsigned: bool = False,
) -> Session:
    """Verify and load a `.lmnl` artifact for the backend that built it.

    `trust_unsigned=True` also loads an artifact that is unsigned or signed by a key this
    install does not trust (`luminal artifact-key`); its hashes, bounds and interface are
    still checked, but its code is the builder's: pass it only for artifacts you vouch for.
    """
    file = Path(path)
    return open_artifact(file, read_artifact(file, trust_unsigned=trust_unsigned), registry)


def open_artifact(file: Path, art: Artifact, registry: Registry | None = None) -> Session:
    """A Session on verified artifact contents (`file` names it in messages)."""
    name, kind = art.manifest.backend, art.manifest.kind
    try:
        backend = (registry or Registry.installed()).get(name)
    except UsageError as err:
        raise ArtifactIncompatible(f"{file}: built for '{name}' ({kind}); {err}") from None
    try:
        exe = backend.load(art.manifest, art.members)
    except ArtifactIncompatible as err:  # the backend's reason, with the file it is about
        raise ArtifactIncompatible(f"{file}: {err}") from None
    except IntegrityError as err:  # e.g. a manifest that disagrees with its library
        raise IntegrityError(f"{file}: {err}") from None
    except LuminalError:
        raise
    except Exception as err:
        raise ArtifactIncompatible(
            f"{file}: the '{name}' backend cannot load it here: {one_line(err)}"
        ) from None
    return Session(file, art.manifest, exe, backend)
