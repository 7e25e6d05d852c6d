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

Every Session is metered (`metering.usage`): `run` adds its call and busy time to an
in-memory counter (no I/O), which a background `Meter` flushes to this install's ledger
every minute, at exit, on `close()` (or `with luminal.load(...) as s:`) and when the
Session is collected.  `meter=None` turns it off (benchmark baselines, the bench itself).
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import numpy as np

from luminal.compiler.artifact import (
    Artifact,
    Manifest,
    file_sha256,
    read_artifact,
    read_artifact_bytes,
)
from luminal.compiler.backends.protocol import Backend, Executable
from luminal.compiler.backends.registry import Registry
from luminal.compiler.ir.graph import check_feeds
from luminal.compiler.runtime.profiled import ProfiledExecutable, base_members, public_specs
from luminal.compiler.shapes.record import Specialization
from luminal.errors import (
    ArtifactIncompatible,
    CompilerError,
    IntegrityError,
    LuminalError,
    UsageError,
    one_line,
)
from luminal.metering.usage.counter import UsageCounter
from luminal.metering.usage.meter import Meter, MeterConfig

_perf_ns = time.perf_counter_ns
#: How `load` meters by default: flushed every minute to `$LUMINAL_HOME/ledger`.
METERED = MeterConfig()


class Session:
    def __init__(
        self,
        path: Path,
        manifest: Manifest,
        exe: Executable,
        backend: Backend,
        meter: Meter | None = None,
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.backend = backend
        self.executable = exe
        self.inputs = public_specs(manifest.inputs)
        self.outputs = manifest.outputs
        self._run = exe.run
        self.meter = meter
        self._counter = meter.counter if meter is not None else None
        if meter is not None:
            weakref.finalize(self, meter.close)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        counter = self._counter
        t0 = _perf_ns()
        try:
            out = self._run(inputs)
        except LuminalError:
            raise
        except Exception as err:
            check_feeds(self.inputs, inputs)  # the caller's mistake, if it was one: one line
            raise CompilerError(
                f"{self.path}: the '{self.backend.name}' backend failed while running: {one_line(err)}"
            ) from None
        if counter is not None:
            counter.add(_perf_ns() - t0)
        return out

    def close(self) -> None:
        """Flush this Session's usage to the ledger and stop its meter (idempotent)."""
        if self.meter is not None:
            self.meter.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def load(
    path: str | os.PathLike[str],
    registry: Registry | None = None,
    *,
    trust_unsigned: bool = False,
    meter: MeterConfig | None = METERED,
) -> Session:
    """Verify and load a `.lmnl` artifact for the backend that built it.

    `trust_unsigned=True` also loads an artifact that is unsigned or signed by a key this
    install does not trust (`luminal artifact-key`); its hashes, bounds and interface are
    still checked, but its code is the builder's: pass it only for artifacts you vouch for.
    `meter` sets how usage is flushed to the ledger (None: not metered).
    """
    file = Path(path)
    return open_artifact(
        file, read_artifact(file, trust_unsigned=trust_unsigned), registry, meter=meter
    )


def artifact_id(file: Path) -> str:
    """How the ledger and reports name an artifact: the SHA-256 of its file."""
    return "sha256:" + file_sha256(file)


def open_artifact(
    file: Path,
    art: Artifact,
    registry: Registry | None = None,
    *,
    meter: MeterConfig | None = None,
) -> Session:
    """A Session on verified artifact contents (`file` names it in messages)."""
    name, kind = art.manifest.backend, art.manifest.kind
    try:
        backend = (registry or Registry.installed()).get(name)
    except UsageError as err:
        raise ArtifactIncompatible(f"{file}: built for '{name}' ({kind}); {err}") from None
    try:
        exe = _load(file, art, backend)
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
    metered = None
    if meter is not None:
        # named by the bytes read_artifact verified, not by reading the file again
        metered = Meter("sha256:" + art.file_sha256, kind, UsageCounter(), meter)
    return Session(file, art.manifest, exe, backend, metered)


def _load(file: Path, art: Artifact, backend: Backend) -> Executable:
    """The backend's executable; for a profiled artifact, the dispatcher over its
    specializations (the opt point's loaded now, the others on first use)."""
    if art.manifest.profile is None:
        return backend.load(art.manifest, art.members)
    missing = [
        s.member for s in art.manifest.profile.specializations[1:] if s.member not in art.members
    ]
    if missing:
        raise IntegrityError(f"its profile names members it does not hold: {missing}")

    def load_inner(spec: Specialization) -> Executable:
        # The outer manifest is signed and lists this member's SHA-256, checked when the
        # artifact was read: the inner artifact is as trusted as the outer one.
        inner = read_artifact_bytes(
            art.members[spec.member], f"{file}:{spec.member}", trust_unsigned=True
        )
        return backend.load(inner.manifest, inner.members)

    opt = backend.load(art.manifest, base_members(art))
    return ProfiledExecutable(art.manifest, opt, load_inner)
