"""Same conditions for both arms: one process, one CPU set, one thread count; and the
machine's fingerprint for the report.

Both arms run in the bench process, so they share its CPU affinity (`--cpus` narrows it
with `sched_setaffinity` before anything runs).  The thread count (default: the CPUs in
the affinity set) is given to the baseline (ORT intra-op threads, `torch.set_num_threads`)
and to luminal: `LUMINAL_NUM_THREADS` (read by a compiled model's thread pool when its
first parallel kernel runs) and `OMP_NUM_THREADS` are set in this process's environment
before any model runs, and, since libgomp may already be loaded (torch uses it),
`omp_set_num_threads` is called on it as well.  `omp_threads()` reads back what OpenMP
will actually use (None when no OpenMP runtime is loaded).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from dataclasses import dataclass

from luminal._version import __version__
from luminal.compiler.hardware import detect_cpu
from luminal.errors import UsageError


@dataclass(frozen=True)
class Conditions:
    threads: int
    affinity: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "threads": self.threads,
            "affinity": list(self.affinity),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "LUMINAL_NUM_THREADS": os.environ.get("LUMINAL_NUM_THREADS"),
            "omp_max_threads": omp_threads(),
        }


def parse_cpus(text: str | None) -> tuple[int, ...] | None:
    """`0-3,6` -> (0, 1, 2, 3, 6)."""
    if not text:
        return None
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise UsageError(f"--cpus '{text}': expected a list like 0-3,6") from None
    return tuple(sorted(cpus))


def apply(threads: int | None, cpus: tuple[int, ...] | None) -> Conditions:
    """Pin this process and set the thread count; call before loading any model."""
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except (OSError, ValueError) as err:
            raise UsageError(f"--cpus {list(cpus)}: cannot pin to them ({err})") from None
    affinity = tuple(sorted(os.sched_getaffinity(0)))
    n = threads or len(affinity)
    if n < 1:
        raise UsageError(f"--threads must be >= 1, got {n}")
    os.environ["OMP_NUM_THREADS"] = str(n)
    os.environ["LUMINAL_NUM_THREADS"] = str(n)
    gomp = _libgomp()
    if gomp is not None:
        gomp.omp_set_num_threads(ctypes.c_int(n))
    return Conditions(n, affinity)


def omp_threads() -> int | None:
    """What OpenMP will use for a parallel region started from this thread (None if no
    OpenMP runtime is loaded yet)."""
    gomp = _libgomp()
    return int(gomp.omp_get_max_threads()) if gomp is not None else None


def _libgomp() -> ctypes.CDLL | None:
    """libgomp if this process has loaded it (never loads it otherwise)."""
    try:
        with open("/proc/self/maps") as f:
            loaded = any("libgomp" in line for line in f)
    except OSError:
        loaded = False
    if not loaded:
        return None
    try:
        return ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        return None


def machine() -> dict[str, object]:
    """What the numbers were measured on."""
    from luminal.licensing.identity import machine_fingerprint

    cpu = detect_cpu()
    return {
        "cpu": cpu.to_json(),
        "fingerprint": machine_fingerprint(),
        "hostname": platform.node(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "luminal": __version__,
        "devices": [{"kind": "cpu", "model": cpu.model, "fingerprint": cpu.fingerprint}],
    }


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []
