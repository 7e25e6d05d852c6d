"""Everything luminal can see on a machine: the CPU, NVIDIA and AMD GPUs, and the
accelerators on the PCI bus.  Each source that is absent simply contributes nothing."""

from __future__ import annotations

from luminal.compiler.hardware import amd, nvidia, pci
from luminal.compiler.hardware.cpu import cpu_device, detect_cpu
from luminal.compiler.hardware.device import Device
from luminal.compiler.hardware.probe import Probe


def discover(probe: Probe | None = None) -> list[Device]:
    """The probed machine's devices (default: this machine, or `LUMINAL_HARDWARE_ROOT`)."""
    probe = probe or Probe.from_env()
    return [
        cpu_device(detect_cpu(probe.root)),
        *nvidia.discover(probe),
        *amd.discover(probe),
        *pci.accelerators(probe),
    ]
