"""A schedule compiled and opened in this process, without writing an artifact.

For tests, the kernel profiler and timing variants: `NativeLibrary.build(sched, options)`
generates the C, compiles it for this machine (`toolchain.build_shared_library`, linked
with OpenBLAS when a kernel's variant calls it) and opens it with ctypes; `run(feeds)`
calls `lum_run` with the packed weights and a fresh arena; `kernel_seconds()` reads the
per-kernel timers of a library built with `CodegenOptions(profile=True)`.
"""

from __future__ import annotations

import ctypes
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.schedule import Schedule
from luminal.errors import UsageError

ALIGN = 64


@dataclass(frozen=True)
class NativeLibrary:
    sched: Schedule
    lib: ctypes.CDLL
    weights: np.ndarray
    arena: np.ndarray  # reused by every run: one caller at a time
    source: str

    @staticmethod
    def build(
        sched: Schedule,
        options: codegen.CodegenOptions,
        flags: tuple[str, ...] = (),
        tc: toolchain.Toolchain | None = None,
    ) -> NativeLibrary:
        tc = tc or toolchain.find_toolchain()
        source = codegen.generate(sched, options)
        data = toolchain.build_shared_library(source, tc, flags)
        with tempfile.TemporaryDirectory(prefix="luminal-native-") as tmp:
            path = Path(tmp) / "model.so"
            path.write_bytes(data)
            lib = ctypes.CDLL(str(path))
        lib.lum_run.argtypes = [ctypes.c_void_p] * 4
        lib.lum_run.restype = ctypes.c_int
        blob = sched.weights_blob()
        weights = aligned(len(blob))
        weights[:] = np.frombuffer(blob, np.uint8)
        return NativeLibrary(sched, lib, weights, aligned(sched.arena_bytes), source)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        g = self.sched.graph
        ins = [np.ascontiguousarray(feeds[name]) for name, _ in g.inputs]
        outs = [np.empty(s.shape, s.dtype.np) for s in g.output_specs()]
        arena = self.arena
        in_ptrs = (ctypes.c_void_p * max(len(ins), 1))(*[a.ctypes.data for a in ins])
        out_ptrs = (ctypes.c_void_p * max(len(outs), 1))(*[a.ctypes.data for a in outs])
        status = self.lib.lum_run(arena.ctypes.data, self.weights.ctypes.data, in_ptrs, out_ptrs)
        if status != 0:
            raise UsageError("an index input is out of range for the tensor it indexes")
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


def aligned(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start : start + nbytes]
