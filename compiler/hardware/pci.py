"""The PCI bus as Linux shows it in sysfs, and the accelerators found on it.

Every device is a folder `/sys/bus/pci/devices/<domain:bus:slot.fn>` whose `vendor`,
`device` and `class` files hold hex ids.  An accelerator is a device whose vendor is in
`ACCELERATOR_VENDORS` and whose class is a processing accelerator or co-processor, or whose
(vendor, device) pair is listed by name in `KNOWN_DEVICES`; any other processing
accelerator is reported as an unknown one, so the user sees it is there.  GPUs (NVIDIA,
AMD) are left to their own discovery, which knows more about them.

A plugin finds its own device with `scan(probe)` and its ids (docs/plugins.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.compiler.hardware.device import Device
from luminal.compiler.hardware.probe import Probe

DEVICES = "/sys/bus/pci/devices"
NVIDIA, AMD = 0x10DE, 0x1002
GPU_VENDORS = frozenset({NVIDIA, AMD})
#: PCI class codes (base class, subclass) of compute devices: 0x12 "processing
#: accelerator", 0x0b40 "co-processor".
ACCELERATOR_CLASSES = ((0x12, None), (0x0B, 0x40))

ACCELERATOR_VENDORS: dict[int, str] = {
    0x1D0F: "Amazon (Annapurna Labs)",
    0x1DA3: "Habana Labs",
    0x1E52: "Tenstorrent",
    0x17CB: "Qualcomm",
    0x1AC1: "Global Unichip (Coral)",
    0x1DE0: "Groq",
}

KNOWN_DEVICES: dict[tuple[int, int], str] = {
    (0x1E52, 0xFACA): "Tenstorrent Grayskull",
    (0x1E52, 0x401E): "Tenstorrent Wormhole",
    (0x1E52, 0xB140): "Tenstorrent Blackhole",
    (0x1DA3, 0x1000): "Habana Gaudi",
    (0x1DA3, 0x1020): "Habana Gaudi2",
    (0x17CB, 0xA100): "Qualcomm Cloud AI 100",
    (0x1AC1, 0x089A): "Coral Edge TPU",
}


@dataclass(frozen=True)
class PciDevice:
    address: str  # "0000:3b:00.0"
    vendor: int
    device: int
    class_code: int  # 24 bits: base class, subclass, programming interface
    driver: str | None  # the bound kernel module, where one is
    numa_node: int | None

    @property
    def base_class(self) -> int:
        return self.class_code >> 16

    @property
    def subclass(self) -> int:
        return (self.class_code >> 8) & 0xFF

    @property
    def ids(self) -> str:
        return f"{self.vendor:04x}:{self.device:04x}"

    def is_accelerator_class(self) -> bool:
        return any(
            self.base_class == b and (s is None or self.subclass == s)
            for b, s in ACCELERATOR_CLASSES
        )


def scan(probe: Probe) -> list[PciDevice]:
    """Every PCI device under the probe's sysfs, in address order; [] without sysfs."""
    base = probe.path(DEVICES)
    try:
        entries = sorted(p for p in base.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        vendor = _hex(probe.read(entry / "vendor"))
        device = _hex(probe.read(entry / "device"))
        if vendor is None or device is None:
            continue
        driver = entry / "driver"
        numa = probe.read(entry / "numa_node")
        found.append(
            PciDevice(
                address=entry.name,
                vendor=vendor,
                device=device,
                class_code=_hex(probe.read(entry / "class")) or 0,
                driver=driver.resolve().name if driver.is_symlink() else None,
                numa_node=int(numa) if numa and numa.lstrip("-").isdigit() else None,
            )
        )
    return found


def accelerators(probe: Probe) -> list[Device]:
    """Accelerators on the bus that no GPU discovery covers, as devices of kind
    "accelerator" (a plugin's discovery turns the ones it serves into its own kind)."""
    out: list[Device] = []
    for pci in scan(probe):
        if pci.vendor in GPU_VENDORS:
            continue
        name = KNOWN_DEVICES.get((pci.vendor, pci.device))
        vendor = ACCELERATOR_VENDORS.get(pci.vendor)
        if name is None and not pci.is_accelerator_class():
            continue
        if name is None and vendor is None:
            name = f"unknown accelerator {pci.ids}"
        elif name is None:
            name = f"{vendor} accelerator {pci.ids}"
        out.append(
            Device(
                kind="accelerator",
                vendor=vendor or f"0x{pci.vendor:04x}",
                name=name,
                memory_bytes=None,
                arch=pci.ids,
                driver=pci.driver,
                index=len(out),
                source="pci",
                bus_id=pci.address,
                details={"pci_ids": pci.ids, "class": f"0x{pci.class_code:06x}"},
            )
        )
    return out


def normal_bus_id(bus_id: str) -> str:
    """One form for a PCI address: NVML and nvidia-smi say 00000000:3B:00.0, sysfs says
    0000:3b:00.0."""
    text = bus_id.strip().lower()
    domain, sep, rest = text.rpartition(":")
    if not sep:
        return text
    head, _, tail = domain.rpartition(":")
    if head:  # "domain:bus" before the slot
        return f"{int(head, 16):04x}:{tail}:{rest}"
    return f"0000:{domain}:{rest}"


def _hex(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(text, 16)
    except ValueError:
        return None
