"""The `.lmnl` artifact: one file holding a manifest, the shared library and the weights.

It is a ZIP archive (members stored, not compressed) with

    manifest.json   the `Manifest` (artifact/manifest.py: compiler version, the
                    backend's target record, inputs and outputs, memory plan, chosen
                    variants), the format version, and the SHA-256 and size of every
                    other member
    ...             the backend's members; on the CPU `model.so` (entry point
                    `lum_run`), `weights.bin` (packed constants, 64-byte aligned) and
                    `model.c` (the generated source, for audit)

`write_artifact` writes to a temporary file beside the target and renames it, so an
artifact is either complete or absent.  `read_artifact` checks every hash before
anything is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from luminal.compiler.artifact.manifest import Manifest, Memory, SourceModel
from luminal.errors import ArtifactIncompatible, IntegrityError, UsageError

FORMAT = "luminal-artifact"
#: 2: the typed manifest (every target's record names its backend; the CPU's ABI moved
#: into its target record).
FORMAT_VERSION = 2
MANIFEST = "manifest.json"

__all__ = [
    "MANIFEST",
    "Artifact",
    "Manifest",
    "Memory",
    "SourceModel",
    "read_artifact",
    "sha256",
    "write_artifact",
]


@dataclass(frozen=True)
class Artifact:
    manifest: Manifest
    members: Mapping[str, bytes]  # verified contents, manifest excluded


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_artifact(path: Path, manifest: Manifest, members: Mapping[str, bytes]) -> None:
    full = manifest.to_json()
    full["format"] = FORMAT
    full["format_version"] = FORMAT_VERSION
    full["members"] = {
        name: {"sha256": sha256(data), "bytes": len(data)} for name, data in members.items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
                z.writestr(MANIFEST, json.dumps(full, indent=2, sort_keys=True))
                for name, data in members.items():
                    z.writestr(name, data)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it the artifact
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_artifact(path: Path) -> Artifact:
    """Read and verify an artifact: every member must match the manifest's SHA-256."""
    if not path.is_file():
        raise UsageError(f"{path}: no such artifact")
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            if MANIFEST not in names:
                raise IntegrityError(f"{path}: not a luminal artifact (no manifest)")
            manifest = json.loads(z.read(MANIFEST))
            _check_format(path, manifest)
            typed = Manifest.from_json(manifest, str(path))
            listed = manifest.get("members", {})
            if not isinstance(listed, dict) or not all(
                isinstance(i, dict) for i in listed.values()
            ):
                raise IntegrityError(
                    f"{path}: manifest field 'members' is not an object of records"
                )
            extra = set(names) - set(listed) - {MANIFEST}
            if extra:
                raise IntegrityError(f"{path}: members not in the manifest: {sorted(extra)}")
            members = {}
            for name, info in listed.items():
                if name not in names:
                    raise IntegrityError(f"{path}: member '{name}' is missing")
                data = z.read(name)
                if len(data) != info.get("bytes") or sha256(data) != info.get("sha256"):
                    raise IntegrityError(
                        f"{path}: member '{name}' does not match its SHA-256 in the manifest"
                    )
                members[name] = data
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as err:
        # A damaged member fails the ZIP's own CRC before our hash: same verdict.
        raise IntegrityError(f"{path}: damaged artifact ({' '.join(str(err).split())})") from None
    return Artifact(typed, members)


def _check_format(path: Path, manifest: Any) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise IntegrityError(f"{path}: not a luminal artifact")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ArtifactIncompatible(
            f"{path}: artifact format {manifest.get('format_version')} is not supported by this luminal "
            f"(format {FORMAT_VERSION}); recompile the model"
        )
