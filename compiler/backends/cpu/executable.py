"""A CPU artifact opened for running: its checks, then the library behind `NativeRunner`.

Opening checks, before any code is mapped, that the artifact was built for this
machine's architecture and CPU features, loads the OpenBLAS it links (when a kernel
calls it), opens the library from the verified bytes (signed, hashed: artifact/), then,
before the first run, checks the library's ABI and its own interface (`lum_interface()`:
arena and weights bytes, each input's and output's dtype and element count) against the
manifest.  `lum_run` trusts the buffers it is handed, so a manifest that disagrees with
its library (an edited output shape, input shape or arena size) would be a write or read
out of bounds; it is an IntegrityError instead.  `run` takes a fast path when every feed
already is a contiguous array of the right shape and dtype (a tiny model runs in tens of
microseconds, so per-call Python matters), else the full input checks.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any

import numpy as np

from luminal.compiler.artifact.manifest import Manifest
from luminal.compiler.backends.cpu.codegen import describe
from luminal.compiler.backends.cpu.native import NativeRunner, open_library
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir.graph import check_feeds
from luminal.errors import ArtifactIncompatible, IntegrityError

ABI = 1  # lum_abi_version() of the generated library: lum_run(arena, weights, in, out)


class CpuExecutable:
    def __init__(self, manifest: Manifest, members: Mapping[str, bytes]) -> None:
        target = manifest.target
        check_target(target)
        if "blas" in target:  # opened first: the model library needs it
            from luminal.compiler.backends.cpu import blas

            blas.load(target["blas"], "this artifact")
        library = open_library(members["model.so"])
        if library.lum_abi_version() != target.get("abi"):
            raise ArtifactIncompatible(
                f"library ABI {library.lum_abi_version()} != manifest {target.get('abi')}"
            )
        check_interface(library, manifest, len(members["weights.bin"]))
        self.inputs = manifest.inputs
        self.outputs = manifest.outputs
        self._runner = NativeRunner(
            library, members["weights.bin"], manifest.memory.arena_bytes, self.inputs, self.outputs
        )
        self._expect = tuple((s.name, s.shape, s.dtype.np) for s in self.inputs)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays = self._fast_inputs(feeds)
        if arrays is None:
            arrays = [
                np.ascontiguousarray(a) if a.ndim else a.reshape(()).copy()
                for a in check_feeds(self.inputs, feeds)
            ]
        outs = self._runner.run(arrays)
        return {s.name: a for s, a in zip(self.outputs, outs, strict=True)}

    def _fast_inputs(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray] | None:
        """The feeds as they are, when every one is already a contiguous array of the
        right shape and dtype and nothing extra was passed; else None (full checks)."""
        if len(feeds) != len(self._expect):
            return None
        out = []
        for name, shape, dtype in self._expect:
            a = feeds.get(name)
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


def check_target(target: Mapping[str, Any]) -> None:
    """ArtifactIncompatible unless this machine can run code built for `target`."""
    cpu = detect_cpu()
    if target.get("arch") != cpu.arch:
        raise ArtifactIncompatible(f"built for {target.get('arch')}, this machine is {cpu.arch}")
    missing = [f for f in target.get("cpu_features", []) if f not in cpu.simd]
    if missing:
        raise ArtifactIncompatible(
            f"built for CPU features this machine lacks: {', '.join(missing)}; recompile it here"
        )


def check_interface(library: ctypes.CDLL, manifest: Manifest, weights_bytes: int) -> None:
    """IntegrityError unless the library's own interface is the manifest's (and the
    weights member is as long as the library reads)."""
    try:
        fn = library.lum_interface
    except AttributeError:
        raise IntegrityError(
            "the library does not report its interface (no lum_interface)"
        ) from None
    fn.argtypes = []
    fn.restype = ctypes.c_char_p
    got = (fn() or b"").decode("ascii", "replace")
    memory = manifest.memory
    if memory.weights_bytes != weights_bytes:
        raise IntegrityError(
            f"manifest says {memory.weights_bytes} weight bytes, weights.bin holds {weights_bytes}"
        )
    want = describe(memory.arena_bytes, weights_bytes, manifest.inputs, manifest.outputs)
    if got != want:
        diff = [
            f"{field.partition('=')[0]}: library {field.partition('=')[2]}, manifest {mine.partition('=')[2]}"
            for field, mine in zip(got.split(" "), want.split(" "), strict=False)
            if field != mine
        ] or [f"library {got!r}, manifest {want!r}"]
        raise IntegrityError(
            f"the manifest does not match its library's interface ({'; '.join(diff)})"
        )
