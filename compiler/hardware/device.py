"""`Device`: one piece of hardware a backend can compile for, however it was found."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu" | "cuda" | "rocm" | a plugin's own kind (e.g. "asic")
    vendor: str  # "GenuineIntel", "NVIDIA", "AMD", a plugin vendor name
    name: str  # marketing name: "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"
    memory_bytes: int | None
    arch: str  # "x86_64", "sm_90", "gfx942", or the plugin's architecture name
    driver: str | None = None  # driver or firmware version, where known
    index: int = 0  # position among devices of its kind
    source: str = ""  # how it was found: "proc", "nvml", "nvidia-smi", "amdsmi", "sysfs", "pci"
    bus_id: str | None = None  # PCI address, where known
    details: Mapping[str, str] = field(default_factory=dict)  # extra facts, for display

    @property
    def fingerprint(self) -> str:
        """Stable id of what generated code depends on: the part (kind, vendor, name,
        arch) and, for a CPU, its instruction-set features.  Not the driver, the bus slot
        or the amount of memory: a tuning result holds across those (GPU names already
        tell memory variants apart: "H100 80GB HBM3", "A100-SXM4-40GB")."""
        features = str(self.details.get("features", ""))
        text = "|".join((self.kind, self.vendor, self.name, self.arch, features))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "vendor": self.vendor,
            "name": self.name,
            "memory_bytes": self.memory_bytes,
            "arch": self.arch,
            "driver": self.driver,
            "index": self.index,
            "source": self.source,
            "bus_id": self.bus_id,
            "details": dict(self.details),
            "fingerprint": self.fingerprint,
        }
