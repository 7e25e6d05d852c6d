"""CPU discovery from /proc/cpuinfo (Linux), with portable fallbacks.

Parsing takes the file's text, so tests feed recorded cpuinfo from other machines.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path

from luminal.compiler.hardware.device import Device

#: SIMD and matrix features that change what code the CPU backend may emit.
SIMD_FLAGS = (
    "sse2",
    "sse4_1",
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    # aarch64 "Features"
    "asimd",
    "asimdhp",
    "asimddp",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
)


@dataclass(frozen=True)
class CpuInfo:
    arch: str
    model: str
    vendor: str
    logical_cores: int
    simd: tuple[str, ...]
    memory_bytes: int | None

    @property
    def fingerprint(self) -> str:
        """Stable id of what matters for generated code: arch, model and SIMD features."""
        text = "|".join((self.arch, self.model, ",".join(self.simd)))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["simd"] = list(self.simd)
        data["fingerprint"] = self.fingerprint
        return data


def parse_cpuinfo(text: str, arch: str) -> tuple[str, str, tuple[str, ...], int]:
    """(model, vendor, simd flags, logical cores) from /proc/cpuinfo text."""
    model = vendor = ""
    flags: set[str] = set()
    processors = 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key == "processor":
            processors += 1
        elif key in ("model name", "cpu model", "hardware") and not model:
            model = value
        elif key in ("vendor_id", "cpu implementer") and not vendor:
            vendor = value
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    simd = tuple(f for f in SIMD_FLAGS if f in flags)
    return model or platform.processor() or arch, vendor, simd, processors


def parse_meminfo(text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) >= 2 and parts[1].isdigit() else None
    return None


def detect_cpu(root: Path = Path("/")) -> CpuInfo:
    """Describe this machine's CPU.  `root` lets tests point at a fake /proc tree."""
    arch = platform.machine() or "unknown"
    cpuinfo = _read(root / "proc" / "cpuinfo")
    model, vendor, simd, processors = parse_cpuinfo(cpuinfo, arch)
    cores = processors or os.cpu_count() or 1
    if root == Path("/") and hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    return CpuInfo(
        arch=arch,
        model=model,
        vendor=vendor,
        logical_cores=cores,
        simd=simd,
        memory_bytes=parse_meminfo(_read(root / "proc" / "meminfo")),
    )


def cpu_device(cpu: CpuInfo) -> Device:
    """The CPU as a `Device`: its SIMD features are part of its fingerprint, since the C
    the CPU backend emits depends on them."""
    return Device(
        kind="cpu",
        vendor=cpu.vendor or "unknown",
        name=cpu.model,
        memory_bytes=cpu.memory_bytes,
        arch=cpu.arch,
        source="proc",
        details={"logical_cores": str(cpu.logical_cores), "features": " ".join(cpu.simd)},
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
