"""Hardware discovery: the CPU, NVIDIA GPUs (NVML or nvidia-smi), AMD GPUs (amdsmi,
rocm-smi or sysfs) and accelerators on the PCI bus, each described as a `Device`.

Every probe of the machine goes through a `Probe` (its root, tools and vendor modules),
so tests and `LUMINAL_HARDWARE_ROOT` can point discovery at a recorded machine.
"""

from luminal.compiler.hardware.cpu import CpuInfo, cpu_device, detect_cpu
from luminal.compiler.hardware.device import Device
from luminal.compiler.hardware.machine import discover
from luminal.compiler.hardware.pci import PciDevice
from luminal.compiler.hardware.pci import scan as scan_pci
from luminal.compiler.hardware.probe import Probe

__all__ = [
    "CpuInfo",
    "Device",
    "PciDevice",
    "Probe",
    "cpu_device",
    "detect_cpu",
    "discover",
    "scan_pci",
]
