"""The `.lmnl` artifact: one file holding a manifest, its signature, the library and weights.

It is a ZIP archive (members stored, not compressed) with

    manifest.json   the `Manifest` (artifact/manifest.py: compiler version, the
                    backend's target record, inputs and outputs, memory plan, chosen
                    variants), the format version, and the SHA-256 and size of every
                    other member
    manifest.sig    a DSSE envelope over manifest.json's bytes, signed by the building
                    install's key (artifact/signing.py)
    ...             the backend's members; on the CPU `model.so` (entry point
                    `lum_run`), `weights.bin` (packed constants, 64-byte aligned) and
                    `model.c` (the generated source, for audit)

`write_artifact` signs the manifest and writes to a temporary file beside the target and
renames it, so an artifact is either complete or absent.  `read_artifact` trusts nothing
it has not checked, in this order: the ZIP's records against size caps
(artifact/limits.py) before anything is decompressed; the manifest's format; its
signature against this install's trusted keys (artifact/trust.py); its fields and
bounds; then every member's size and SHA-256 before its bytes are used.  Only then does
a backend see the contents, so no code is mapped from an artifact that failed any check.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from luminal.compiler.artifact import limits
from luminal.compiler.artifact.manifest import Manifest, Memory, SourceModel
from luminal.compiler.artifact.signing import SIGNATURE, Provenance, Signer, Trust, verify
from luminal.compiler.artifact.trust import TrustStore
from luminal.errors import ArtifactIncompatible, CompilerError, IntegrityError, UsageError

FORMAT = "luminal-artifact"
#: 2: the typed manifest (every target's record names its backend; the CPU's ABI moved
#: into its target record).  3: signed (manifest.sig); the CPU library reports its
#: interface (lum_interface).
FORMAT_VERSION = 3
MANIFEST = "manifest.json"

__all__ = [
    "MANIFEST",
    "SIGNATURE",
    "Artifact",
    "Manifest",
    "Memory",
    "Provenance",
    "Signer",
    "SourceModel",
    "Trust",
    "file_sha256",
    "read_artifact",
    "read_artifact_bytes",
    "sha256",
    "write_artifact",
]


@dataclass(frozen=True)
class Artifact:
    manifest: Manifest
    members: Mapping[str, bytes]  # verified contents, manifest and signature excluded
    provenance: Provenance  # who signed it, and why this install accepted it
    file_sha256: str = ""  # of the file these contents were read from (how it is named)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file, read in 1 MiB blocks."""
    with open(path, "rb") as f:
        return _stream_sha256(f)


def _stream_sha256(f: Any) -> str:
    h = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


def write_artifact(
    path: Path, manifest: Manifest, members: Mapping[str, bytes], signer: Signer | None = None
) -> None:
    """Write a signed artifact (by `signer`, default this install's key) atomically."""
    if SIGNATURE in members or MANIFEST in members:
        raise CompilerError(f"a backend member may not be named {MANIFEST} or {SIGNATURE}")
    full = manifest.to_json()
    full["format"] = FORMAT
    full["format_version"] = FORMAT_VERSION
    full["members"] = {
        name: {"sha256": sha256(data), "bytes": len(data)} for name, data in members.items()
    }
    text = json.dumps(full, indent=2, sort_keys=True).encode()
    envelope = (signer or Signer.for_install()).sign(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
                z.writestr(MANIFEST, text)
                z.writestr(SIGNATURE, envelope)
                for name, data in members.items():
                    z.writestr(name, data)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it the artifact
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_artifact(
    path: Path, *, trust_unsigned: bool = False, store: TrustStore | None = None
) -> Artifact:
    """Read and verify an artifact (see the module docstring for the order of checks).

    `trust_unsigned` accepts an unsigned or untrusted signature (everything else is still
    checked); `store` is the trusted keys, default this install's (`$LUMINAL_HOME`).
    """
    if not path.is_file():
        raise UsageError(f"{path}: no such artifact")
    try:
        # One open file for the digest and the contents: a file replaced while it is read
        # (an atomic rename by another compile) cannot be named by the other one's hash.
        with path.open("rb") as fh:
            return _read(fh, str(path), path.stat().st_size, trust_unsigned, store)
    except OSError as err:
        raise IntegrityError(f"{path}: damaged artifact ({' '.join(str(err).split())})") from None


def read_artifact_bytes(
    data: bytes, where: str, *, trust_unsigned: bool = False, store: TrustStore | None = None
) -> Artifact:
    """`read_artifact` on an artifact held in memory (a profile's specialization, which
    its outer artifact carries as a member); `where` names it in messages."""
    return _read(io.BytesIO(data), where, len(data), trust_unsigned, store)


def _read(
    fh: BinaryIO, where: str, size: int, trust_unsigned: bool, store: TrustStore | None
) -> Artifact:
    path = Path(where)
    budget = limits.memory_budget()
    try:
        file_digest = _stream_sha256(fh)
        fh.seek(0)
        with zipfile.ZipFile(fh) as z:
            infos = z.infolist()
            limits.check_zip(
                where,
                infos,
                size,
                budget,
                {MANIFEST: limits.MANIFEST_BYTES, SIGNATURE: limits.SIGNATURE_BYTES},
            )
            names = {i.filename for i in infos}
            if MANIFEST not in names:
                raise IntegrityError(f"{path}: not a luminal artifact (no manifest)")
            text = _member(path, z, MANIFEST)
            manifest = _parse(path, text)
            _check_format(path, manifest)
            signature = _member(path, z, SIGNATURE) if SIGNATURE in names else None
            provenance = verify(where, text, signature, store or TrustStore.load(), trust_unsigned)
            typed = Manifest.from_json(manifest, where)
            limits.check_manifest(where, typed, budget)
            members = _read_members(path, z, manifest.get("members", {}), names)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        EOFError,
        ValueError,
        NotImplementedError,  # zipfile: a record claiming a ZIP version or feature it lacks
        RuntimeError,  # zipfile: an encrypted member
    ) as err:
        # A damaged member fails the ZIP's own CRC before our hash: same verdict.
        raise IntegrityError(f"{path}: damaged artifact ({' '.join(str(err).split())})") from None
    return Artifact(typed, members, provenance, file_digest)


def _member(path: Path, z: zipfile.ZipFile, name: str) -> bytes:
    """A member's bytes; its local header (which `check_zip` does not see) may still ask
    for encryption or a ZIP feature `zipfile` lacks: refused like any damage."""
    try:
        return z.read(name)
    except (RuntimeError, NotImplementedError) as err:
        raise IntegrityError(f"{path}: member '{name}' cannot be read ({err})") from None


def _parse(path: Path, text: bytes) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise IntegrityError(f"{path}: manifest.json is not JSON") from None


def _read_members(path: Path, z: zipfile.ZipFile, listed: Any, names: set[str]) -> dict[str, bytes]:
    """Every listed member, each size checked before it is read and its hash after."""
    if not isinstance(listed, dict) or not all(isinstance(i, dict) for i in listed.values()):
        raise IntegrityError(f"{path}: manifest field 'members' is not an object of records")
    extra = names - set(listed) - {MANIFEST, SIGNATURE}
    if extra:
        raise IntegrityError(f"{path}: members not in the manifest: {sorted(extra)}")
    members = {}
    for name, info in listed.items():
        if name not in names or name in (MANIFEST, SIGNATURE):
            raise IntegrityError(f"{path}: member '{name}' is missing")
        if info.get("bytes") != z.getinfo(name).file_size:
            raise IntegrityError(f"{path}: member '{name}' does not match its size in the manifest")
        data = _member(path, z, name)
        if len(data) != info.get("bytes") or sha256(data) != info.get("sha256"):
            raise IntegrityError(
                f"{path}: member '{name}' does not match its SHA-256 in the manifest"
            )
        members[name] = data
    return members


def _check_format(path: Path, manifest: Any) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise IntegrityError(f"{path}: not a luminal artifact")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ArtifactIncompatible(
            f"{path}: artifact format {manifest.get('format_version')} is not supported by this luminal "
            f"(format {FORMAT_VERSION}); recompile the model"
        )
