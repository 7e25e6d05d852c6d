"""Find a C compiler and turn generated C into a shared library.

Order: `$LUMINAL_CC` if set, then `cc`, `gcc`, `clang` on PATH, then the clang inside
the `ziglang` package (`python -m ziglang cc`), so a machine with no toolchain still
compiles.  Flags: -O3, position independent, wrapping signed arithmetic (as numpy),
no errno from math functions, and no floating-point contraction: every IEEE operation is
rounded as written (contraction kernels call fma() explicitly).  No -ffast-math; the
reductions that may be reordered say so per loop with `#pragma omp simd reduction`.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from luminal.compiler.hardware import CpuInfo
from luminal.errors import CompilerError

BASE_FLAGS = (
    "-O3",
    "-std=gnu11",
    "-fPIC",
    "-shared",
    "-fwrapv",
    "-fno-math-errno",
    "-ffp-contract=off",
    "-fopenmp-simd",  # `#pragma omp simd` reductions (no OpenMP runtime: threads.py)
    "-pthread",  # the library's own thread pool (threads.py)
)

#: cpuinfo flag -> compiler flag, for the features code generation may use.
X86_FEATURE_FLAGS = {
    "sse4_2": "-msse4.2",
    "avx": "-mavx",
    "avx2": "-mavx2",
    "fma": "-mfma",
    "f16c": "-mf16c",
    "avx512f": "-mavx512f",
    "avx512bw": "-mavx512bw",
    "avx512vl": "-mavx512vl",
}


@dataclass(frozen=True)
class Toolchain:
    command: tuple[str, ...]  # e.g. ("/usr/bin/cc",) or (python, "-m", "ziglang", "cc")
    name: str
    openmp: bool

    def describe(self) -> str:
        return f"{self.name}{' +openmp' if self.openmp else ''}"


def find_toolchain(env: dict[str, str] | None = None) -> Toolchain:
    env = dict(os.environ if env is None else env)
    choice = env.get("LUMINAL_CC", "")
    if choice == "zig":
        return _zig()
    search = env.get("PATH", "")
    if choice:
        path = shutil.which(choice, path=search)
        if path is None:
            raise CompilerError(f"LUMINAL_CC={choice!r} is not an executable on PATH")
        return _probe((path,), Path(path).name)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name, path=search)
        if path:
            return _probe((path,), name)
    return _zig()


def _zig() -> Toolchain:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        raise CompilerError(
            "no C compiler found: install gcc or clang, or `pip install ziglang` for a bundled one"
        ) from None
    return _probe((sys.executable, "-m", "ziglang", "cc"), "zig cc")


@functools.lru_cache(maxsize=8)
def _probe(command: tuple[str, ...], name: str) -> Toolchain:
    """Whether this compiler has OpenMP; asked once per compiler per process."""
    with tempfile.TemporaryDirectory(prefix="luminal-cc-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text("#include <omp.h>\nint f(void) { return omp_get_max_threads(); }\n")
        ok = subprocess.run(
            [*command, "-fopenmp", "-fPIC", "-shared", str(src), "-o", str(Path(tmp) / "probe.so")],
            capture_output=True,
            timeout=120,
        )
    return Toolchain(command, name, ok.returncode == 0)


def feature_flags(cpu: CpuInfo) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(compiler flags, the cpuinfo features they require)."""
    if cpu.arch not in ("x86_64", "AMD64"):
        return (), ()
    used = tuple(f for f in X86_FEATURE_FLAGS if f in cpu.simd)
    return tuple(X86_FEATURE_FLAGS[f] for f in used), used


def build_shared_library(
    source: str, toolchain: Toolchain, flags: tuple[str, ...], link: tuple[str, ...] = ()
) -> bytes:
    """Compile C source to a shared library and return its bytes; `link` (extra
    libraries) goes after the source, and OpenBLAS is linked when a kernel calls it."""
    from luminal.compiler.backends.cpu import blas

    if blas.MARKER in source:
        link = (*link, *blas.link_flags())
    with tempfile.TemporaryDirectory(prefix="luminal-build-") as tmp:
        src = Path(tmp) / "model.c"
        lib = Path(tmp) / "model.so"
        src.write_text(source)
        cmd = [
            *toolchain.command,
            *BASE_FLAGS,
            *flags,
            str(src),
            "-o",
            str(lib),
            *link,
            "-lm",
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired:
            raise CompilerError(
                f"{toolchain.name} took over 30 minutes to compile the model"
            ) from None
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-6:])
            raise CompilerError(
                f"{toolchain.name} failed on the generated code (a luminal bug): {tail}"
            )
        return lib.read_bytes()
