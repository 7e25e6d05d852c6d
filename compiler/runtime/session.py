"""`luminal.load(path)` -> Session; `Session.run(inputs)` -> outputs.

Loading verifies every member's hash (`artifact.read_artifact`) and the CPU features the
code needs before the library is opened.  The library is written, from the verified
bytes, into a private temporary folder and removed once mapped.  Sessions are safe to use
from many threads: each call takes its own arena from a pool, and ctypes releases the GIL
for the duration of the native call.
"""

from __future__ import annotations

import ctypes
import os
import queue
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from luminal.compiler.artifact import Artifact, read_artifact
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, TensorSpec
from luminal.compiler.ir.graph import check_feeds
from luminal.compiler.runtime.backend import BackendSession, open_with_backend
from luminal.errors import ArtifactIncompatible, UsageError

ALIGN = 64


class Session:
    def __init__(
        self, path: Path, manifest: Mapping[str, Any], library: ctypes.CDLL, weights: np.ndarray
    ) -> None:
        self.path = path
        self.manifest = manifest
        self._lib = library
        self._weights = weights
        self._arena_bytes = int(manifest["memory"]["arena_bytes"])
        # (arena, its address): the address is read once, not on every call.
        self._arenas: queue.SimpleQueue[tuple[np.ndarray, int]] = queue.SimpleQueue()
        self.inputs = tuple(_spec(s) for s in manifest["inputs"])
        self.outputs = tuple(_spec(s) for s in manifest["outputs"])
        self._run = library.lum_run
        self._run.argtypes = [ctypes.c_void_p] * 4
        self._run.restype = ctypes.c_int
        # Per-call work is kept small (a tiny model runs in tens of microseconds): the
        # expected (name, shape, dtype) triples and the pointer-array types are made once.
        self._expect = tuple((s.name, s.shape, s.dtype.np) for s in self.inputs)
        self._made = tuple((s.shape, s.dtype.np) for s in self.outputs)
        self._in_array = ctypes.c_void_p * max(len(self.inputs), 1)
        self._out_array = ctypes.c_void_p * max(len(self.outputs), 1)
        self._weights_ptr = weights.ctypes.data

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = self._fast_inputs(inputs)
        if feeds is None:
            feeds = check_inputs(self.inputs, inputs)
        outs = [np.empty(shape, dtype) for shape, dtype in self._made]
        in_ptrs = self._in_array(*[a.ctypes.data for a in feeds])
        out_ptrs = self._out_array(*[a.ctypes.data for a in outs])
        arena = self._take_arena()
        try:
            status = self._run(arena[1], self._weights_ptr, in_ptrs, out_ptrs)
        finally:
            self._arenas.put(arena)
        if status != 0:
            raise UsageError(
                "an index input is out of range for the tensor it indexes (a gather or scatter)"
            )
        return {s.name: a for s, a in zip(self.outputs, outs, strict=True)}

    def _fast_inputs(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray] | None:
        """The feeds as they are, when every one is already a contiguous array of the
        right shape and dtype and nothing extra was passed; else None (full checks)."""
        if len(inputs) != len(self._expect):
            return None
        out = []
        for name, shape, dtype in self._expect:
            a = inputs.get(name)
            if (
                type(a) is not np.ndarray
                or a.shape != shape
                or a.dtype != dtype
                or not a.flags.c_contiguous
                or not a.ndim
            ):
                return None
            out.append(a)
        return out

    def _take_arena(self) -> tuple[np.ndarray, int]:
        try:
            return self._arenas.get_nowait()
        except queue.Empty:
            arena = _aligned(self._arena_bytes)
            return arena, arena.ctypes.data


def load(path: str | os.PathLike[str]) -> Session | BackendSession:
    """Verify and load a `.lmnl` artifact.  A CPU artifact runs here; one built for
    another target is handed to the backend that built it (compiler/runtime/backend.py)."""
    file = Path(path)
    art = read_artifact(file)
    if art.manifest.get("target", {}).get("kind") != "cpu":
        return open_with_backend(file, art)
    return open_cpu(file, art)


def open_cpu(file: Path | None, art: Artifact) -> Session:
    """A Session on verified artifact contents (`file` only names it in messages)."""
    file = file or Path("<artifact>")
    manifest = art.manifest
    _check_target(file, manifest)
    if "blas" in manifest.get("target", {}):  # opened first: the model library needs it
        from luminal.compiler.backends.cpu import blas

        blas.load(manifest["target"]["blas"], str(file))
    weights = _aligned(len(art.members["weights.bin"]))
    weights[:] = np.frombuffer(art.members["weights.bin"], np.uint8)
    with tempfile.TemporaryDirectory(prefix="luminal-lib-") as tmp:
        lib_path = Path(tmp) / "model.so"
        fd = os.open(lib_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(art.members["model.so"])
        try:
            library = ctypes.CDLL(str(lib_path))
        except OSError as err:
            raise ArtifactIncompatible(
                f"{file}: the compiled library cannot be loaded here ({err})"
            ) from None
    if library.lum_abi_version() != manifest["abi"]:
        raise ArtifactIncompatible(
            f"{file}: library ABI {library.lum_abi_version()} != manifest {manifest['abi']}"
        )
    return Session(file, manifest, library, weights)


def _check_target(file: Path, manifest: Mapping[str, Any]) -> None:
    target = manifest.get("target", {})
    if target.get("kind") != "cpu":
        raise ArtifactIncompatible(
            f"{file}: built for target '{target.get('kind')}', this runtime runs 'cpu'"
        )
    cpu = detect_cpu()
    if target.get("arch") != cpu.arch:
        raise ArtifactIncompatible(
            f"{file}: built for {target.get('arch')}, this machine is {cpu.arch}"
        )
    missing = [f for f in target.get("cpu_features", []) if f not in cpu.simd]
    if missing:
        raise ArtifactIncompatible(
            f"{file}: built for CPU features this machine lacks: {', '.join(missing)}; recompile it here"
        )


def _spec(data: Mapping[str, Any]) -> TensorSpec:
    return TensorSpec(data["name"], tuple(data["shape"]), DType(data["dtype"]))


def check_inputs(
    specs: tuple[TensorSpec, ...], inputs: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """`check_feeds`, then C-contiguous copies where needed (a scalar gets its own)."""
    return [
        np.ascontiguousarray(a) if a.ndim else a.reshape(()).copy()
        for a in check_feeds(specs, inputs)
    ]


def _aligned(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start : start + nbytes]
