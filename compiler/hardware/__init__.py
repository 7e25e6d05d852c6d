"""Hardware discovery.  Today: the CPU; GPUs and accelerators arrive with their backends."""

from luminal.compiler.hardware.cpu import CpuInfo, detect_cpu

__all__ = ["CpuInfo", "detect_cpu"]
