"""Bounds an artifact must stay within before any of it is read, allocated or run.

An artifact is untrusted input until its signature verifies, and even a signed one may
come from a buggy or hostile builder, so every size is checked against a cap before it
is used:

- the ZIP's own records (`check_zip`): how many members, no duplicate names, sizes that
  fit in the file (a stored member) or within `MAX_RATIO` of its compressed bytes (a
  compressed one), the manifest and signature small, everything together within the
  memory this machine has.  `zipfile` never decompresses past a member's declared size,
  so these checks bound what reading can cost: a compression bomb is refused from its
  central directory, before one byte of it is inflated.
- the manifest (`check_manifest`): the arena, the weights and every tensor (rank and
  bytes) within the memory this machine has, so a hand-edited `arena_bytes` of 2^50 is
  a one-line refusal rather than a MemoryError while allocating.

`memory_budget` is what the kernel says is available now (RAM plus free swap), read once
per artifact.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

from luminal.compiler.artifact.manifest import Manifest
from luminal.errors import IntegrityError

#: The writer stores every member uncompressed; a re-zipped artifact may deflate them,
#: but no real member (code, weights, JSON) shrinks more than this.
MAX_RATIO = 20
MAX_MEMBERS = 64
MANIFEST_BYTES = 16 * 2**20
SIGNATURE_BYTES = 64 * 2**10
MAX_RANK = 32
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
#: General-purpose flag bits no artifact uses: encrypted, patched data, strong encryption.
_UNSUPPORTED_FLAGS = 0x1 | 0x20 | 0x40


def memory_budget(meminfo: Path = Path("/proc/meminfo")) -> int:
    """Bytes this process could allocate now: MemAvailable + SwapFree (Linux), else the
    physical memory."""
    fields: dict[str, int] = {}
    try:
        for line in meminfo.read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                fields[key] = int(parts[0]) * 1024
    except OSError:
        pass
    if "MemAvailable" in fields:
        return fields["MemAvailable"] + fields.get("SwapFree", 0)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):  # no sysconf: a cap that still stops absurd sizes
        return 2**40


def _mib(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def check_zip(
    where: str,
    infos: Sequence[zipfile.ZipInfo],
    file_bytes: int,
    budget: int,
    small: dict[str, int],
) -> None:
    """IntegrityError unless the ZIP's records stay within the caps (see the module
    docstring); `small` caps named members (manifest, signature) more tightly."""
    if len(infos) > MAX_MEMBERS:
        raise IntegrityError(f"{where}: {len(infos)} members, more than an artifact holds")
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        raise IntegrityError(f"{where}: a member name appears twice in the archive")
    total = stored = 0
    for info in infos:
        name, size, packed = info.filename, info.file_size, info.compress_size
        if info.flag_bits & _UNSUPPORTED_FLAGS:
            raise IntegrityError(f"{where}: member '{name}' is encrypted or patched")
        if info.compress_type not in _METHODS:
            raise IntegrityError(
                f"{where}: member '{name}' uses compression method {info.compress_type}"
            )
        if info.compress_type == zipfile.ZIP_STORED and size != packed:
            raise IntegrityError(f"{where}: member '{name}' is stored with inconsistent sizes")
        if size > MAX_RATIO * max(packed, 1):
            raise IntegrityError(
                f"{where}: member '{name}' would inflate {packed} bytes to {size} "
                f"(more than {MAX_RATIO}x): refused as a compression bomb"
            )
        cap = small.get(name, budget)
        if size > cap:
            raise IntegrityError(
                f"{where}: member '{name}' declares {_mib(size)}, more than the {_mib(cap)} allowed"
            )
        total += size
        stored += packed
    if stored > file_bytes:
        raise IntegrityError(f"{where}: members claim more bytes than the file holds")
    if total > budget:
        raise IntegrityError(
            f"{where}: members total {_mib(total)}, more than the {_mib(budget)} of memory available"
        )


def check_manifest(where: str, manifest: Manifest, budget: int) -> None:
    """IntegrityError unless the manifest's arena, weights and tensors fit in `budget`."""
    memory = manifest.memory
    for field, value in (
        ("arena_bytes", memory.arena_bytes),
        ("weights_bytes", memory.weights_bytes),
    ):
        if value > budget:
            raise IntegrityError(
                f"{where}: manifest field 'memory.{field}' is {_mib(value)}, more than the "
                f"{_mib(budget)} of memory available"
            )
    for key, specs in (("inputs", manifest.inputs), ("outputs", manifest.outputs)):
        for n, spec in enumerate(specs):
            if len(spec.shape) > MAX_RANK:
                raise IntegrityError(
                    f"{where}: manifest field '{key}[{n}]' has rank {len(spec.shape)} (at most {MAX_RANK})"
                )
            nbytes = spec.dtype.itemsize
            for d in spec.shape:
                nbytes *= d
            if nbytes > budget:
                raise IntegrityError(
                    f"{where}: manifest field '{key}[{n}]' ({spec.name}) needs {_mib(nbytes)}, "
                    f"more than the {_mib(budget)} of memory available"
                )
