"""Running a compiled model library in this process: the one native runner.

    open_library(bytes)    write the verified bytes into a private temporary folder
                           (0600, O_EXCL), dlopen them, remove the folder
    NativeRunner           `lum_run(arena, weights, inputs, outputs)` with the weights
                           copied once (64-byte aligned) and arenas taken from a pool,
                           so one runner is safe from many threads (ctypes releases the
                           GIL for the native call); a non-zero status is an index out of
                           range in a gather or scatter
    NativeLibrary.build    a schedule compiled and opened without writing an artifact,
                           for tests and the kernel profiler (`CodegenOptions(profile=True)`
                           adds per-kernel timers)

Every other CPU path (the runtime's `Session`, the search's timing library, the cost
model's calibration) opens its library through `open_library` and runs a model through
`NativeRunner`.
"""

from __future__ import annotations

import ctypes
import os
import queue
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.ir import TensorSpec
from luminal.compiler.schedule import Schedule
from luminal.errors import ArtifactIncompatible, UsageError

ALIGN = 64
OUT_OF_RANGE = "an index input is out of range for the tensor it indexes (a gather or scatter)"


def open_library(data: bytes, what: str = "the compiled library") -> ctypes.CDLL:
    """dlopen `data` from a private temporary file; ArtifactIncompatible, naming `what`,
    when this machine cannot load it."""
    with tempfile.TemporaryDirectory(prefix="luminal-lib-") as tmp:
        path = Path(tmp) / "library.so"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            return ctypes.CDLL(str(path))
        except OSError as err:
            raise ArtifactIncompatible(f"{what} cannot be loaded here ({err})") from None


def aligned(nbytes: int) -> np.ndarray:
    """A zeroed-on-demand uint8 buffer of `nbytes` whose address is 64-byte aligned."""
    raw = np.empty(max(nbytes, 1) + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start : start + max(nbytes, 1)]


class NativeRunner:
    """One loaded model library's `lum_run`, its weights and a pool of arenas."""

    def __init__(
        self,
        library: ctypes.CDLL,
        weights: bytes,
        arena_bytes: int,
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
    ) -> None:
        self.library = library
        self.weights = aligned(len(weights))
        self.weights[: len(weights)] = np.frombuffer(weights, np.uint8)
        self._weights_ptr = self.weights.ctypes.data
        self._arena_bytes = arena_bytes
        self._arenas: queue.SimpleQueue[tuple[np.ndarray, int]] = queue.SimpleQueue()
        self._run = library.lum_run
        self._run.argtypes = [ctypes.c_void_p] * 4
        self._run.restype = ctypes.c_int
        # Per-call work is kept small (a tiny model runs in tens of microseconds): the
        # output shapes and the pointer-array types are made once.
        self._made = tuple((s.shape, s.dtype.np) for s in outputs)
        self._in_array = ctypes.c_void_p * max(len(inputs), 1)
        self._out_array = ctypes.c_void_p * max(len(outputs), 1)

    def run(self, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Outputs for `feeds`: C-contiguous arrays in input order, of the right shapes
        and dtypes (the caller checked them)."""
        outs = [np.empty(shape, dtype) for shape, dtype in self._made]
        in_ptrs = self._in_array(*[a.ctypes.data for a in feeds])
        out_ptrs = self._out_array(*[a.ctypes.data for a in outs])
        arena = self._take_arena()
        try:
            status = self._run(arena[1], self._weights_ptr, in_ptrs, out_ptrs)
        finally:
            self._arenas.put(arena)
        if status != 0:
            raise UsageError(OUT_OF_RANGE)
        return outs

    def _take_arena(self) -> tuple[np.ndarray, int]:
        try:
            return self._arenas.get_nowait()
        except queue.Empty:
            arena = aligned(self._arena_bytes)
            return arena, arena.ctypes.data


@dataclass(frozen=True)
class NativeLibrary:
    """A schedule built and opened here, for tests and the kernel profiler."""

    sched: Schedule
    runner: NativeRunner
    source: str

    @property
    def lib(self) -> ctypes.CDLL:
        return self.runner.library

    @staticmethod
    def build(
        sched: Schedule,
        options: codegen.CodegenOptions,
        flags: tuple[str, ...] = (),
        tc: toolchain.Toolchain | None = None,
    ) -> NativeLibrary:
        tc = tc or toolchain.find_toolchain()
        source = codegen.generate(sched, options)
        lib = open_library(toolchain.build_shared_library(source, tc, flags))
        g = sched.graph
        runner = NativeRunner(
            lib, sched.weights_blob(), sched.arena_bytes, g.input_specs(), g.output_specs()
        )
        return NativeLibrary(sched, runner, source)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        g = self.sched.graph
        outs = self.runner.run([np.ascontiguousarray(feeds[name]) for name, _ in g.inputs])
        return {name: a for (name, _), a in zip(g.outputs, outs, strict=True)}

    def kernel_seconds(self) -> list[float]:
        """Seconds summed per kernel since the library was opened (profile builds only)."""
        n = self.lib.lum_kernel_count()
        return list((ctypes.c_double * n).in_dll(self.lib, "lum_kernel_seconds"))

    def reset_timers(self) -> None:
        n = self.lib.lum_kernel_count()
        timers = (ctypes.c_double * n).in_dll(self.lib, "lum_kernel_seconds")
        for k in range(n):
            timers[k] = 0.0
