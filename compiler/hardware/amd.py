"""AMD GPUs: the `amdsmi` library, else `rocm-smi --json`, else the amdgpu driver's sysfs.

Each GPU becomes a `Device` of kind "rocm" whose arch is its LLVM target ("gfx942" for
MI300X), read from the tool or from the KFD topology's `gfx_target_version`.  sysfs needs
no ROCm install at all, so a machine with only the kernel driver is still found.
"""

from __future__ import annotations

import json
import re
from typing import Any

from luminal.compiler.hardware.device import Device
from luminal.compiler.hardware.pci import AMD, normal_bus_id
from luminal.compiler.hardware.probe import Probe

DRM = "/sys/class/drm"
KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
MB = 1 << 20

#: Names and targets of data-center parts, for sources that give only the PCI device id.
KNOWN: dict[int, tuple[str, str]] = {
    0x74A1: ("AMD Instinct MI300X", "gfx942"),
    0x74A0: ("AMD Instinct MI300A", "gfx942"),
    0x74A5: ("AMD Instinct MI325X", "gfx942"),
    0x75A0: ("AMD Instinct MI350X", "gfx950"),
    0x740C: ("AMD Instinct MI250X / MI250", "gfx90a"),
    0x740F: ("AMD Instinct MI210", "gfx90a"),
    0x738C: ("AMD Instinct MI100", "gfx908"),
}
#: rocm-smi prints some targets with the stepping in decimal.
_GFX_QUIRKS = {"gfx9010": "gfx90a"}


def discover(probe: Probe) -> list[Device]:
    """The AMD GPUs of the probed machine; [] when there are none."""
    smi = probe.module("amdsmi")
    if smi is not None:
        found = from_amdsmi(smi)
        if found:
            return found
    found = from_rocm_smi(probe)
    return found if found else from_sysfs(probe)


def from_amdsmi(am: Any) -> list[Device] | None:
    """GPUs through the amdsmi Python library; None when it cannot start."""
    try:
        am.amdsmi_init()
    except Exception:
        return None
    try:
        devices = []
        for i, h in enumerate(am.amdsmi_get_processor_handles()):
            asic = _try(am.amdsmi_get_gpu_asic_info, h) or {}
            vram = _try(am.amdsmi_get_gpu_vram_info, h) or {}
            driver = _try(am.amdsmi_get_gpu_driver_info, h) or {}
            device_id = _int(asic.get("device_id"))
            size = _int(vram.get("vram_size"))
            devices.append(
                _device(
                    index=i,
                    name=_known(asic.get("market_name")),
                    device_id=device_id,
                    gfx=gfx_name(asic.get("target_graphics_version")),
                    memory_bytes=size * MB if size else None,
                    driver=_known(driver.get("driver_version")),
                    bus_id=_known(_try(am.amdsmi_get_gpu_device_bdf, h)),
                    source="amdsmi",
                )
            )
        return devices
    except Exception:
        return None
    finally:
        _try(am.amdsmi_shut_down)


def from_rocm_smi(probe: Probe) -> list[Device]:
    """GPUs from `rocm-smi --json`, one query per table (older rocm-smi answers a
    combined query with only its last table)."""
    product = _json(probe.run("rocm-smi", ["--showproductname", "--json"]))
    if not product:
        return []
    memory = _json(probe.run("rocm-smi", ["--showmeminfo", "vram", "--json"]))
    bus = _json(probe.run("rocm-smi", ["--showbus", "--json"]))
    driver = _json(probe.run("rocm-smi", ["--showdriverversion", "--json"]))
    return parse_rocm_smi(product, memory, bus, driver)


def parse_rocm_smi(
    product: dict[str, Any], memory: dict[str, Any], bus: dict[str, Any], driver: dict[str, Any]
) -> list[Device]:
    version = _field(driver.get("system", {}), "driver version")
    devices = []
    for card in sorted((k for k in product if k.startswith("card")), key=_card_index):
        info = {**bus.get(card, {}), **memory.get(card, {}), **product[card]}
        total = _int(_field(info, "vram total memory (b)"))
        devices.append(
            _device(
                index=_card_index(card),
                name=_field(info, "card series") or _field(info, "device name"),
                device_id=_int(_field(info, "card model") or _field(info, "device id")),
                gfx=gfx_name(_field(info, "gfx version")),
                memory_bytes=total,
                driver=version,
                bus_id=_field(info, "pci bus"),
                source="rocm-smi",
            )
        )
    return devices


def from_sysfs(probe: Probe) -> list[Device]:
    """GPUs bound to amdgpu, from /sys/class/drm/card*/device and the KFD topology."""
    try:
        cards = sorted(
            (p for p in probe.path(DRM).iterdir() if re.fullmatch(r"card\d+", p.name)),
            key=lambda p: int(p.name[4:]),
        )
    except OSError:
        return []
    targets = _kfd_targets(probe)
    version = probe.read("/sys/module/amdgpu/version")
    devices = []
    for card in cards:
        dev = card / "device"
        if _int(probe.read(dev / "vendor")) != AMD:
            continue
        bus_id = dev.resolve().name if dev.is_symlink() else _slot_name(probe.read(dev / "uevent"))
        memory = _int(probe.read(dev / "mem_info_vram_total"))
        devices.append(
            _device(
                index=len(devices),
                name=_known(probe.read(dev / "product_name")),
                device_id=_int(probe.read(dev / "device")),
                gfx=targets.get(normal_bus_id(bus_id)) if bus_id else None,
                memory_bytes=memory,
                driver=version,
                bus_id=bus_id,
                source="sysfs",
            )
        )
    return devices


def _slot_name(uevent: str | None) -> str | None:
    for line in (uevent or "").splitlines():
        key, _, value = line.partition("=")
        if key == "PCI_SLOT_NAME":
            return value.strip()
    return None


def gfx_name(value: Any) -> str | None:
    """The LLVM target name (gfx942) from the forms tools use: "gfx942", "GFX942", 90402
    (major*10000 + minor*100 + stepping, as KFD's gfx_target_version)."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text.isdigit():
        v = int(text)
        if not v:
            return None
        return f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}"
    text = text.split(":")[0]  # "gfx90a:sramecc+:xnack-"
    return _GFX_QUIRKS.get(text, text) if text.startswith("gfx") else None


def _kfd_targets(probe: Probe) -> dict[str, str]:
    """PCI address -> gfx target, from each KFD node's properties (CPU nodes have none)."""
    out: dict[str, str] = {}
    try:
        nodes = list(probe.path(KFD_NODES).iterdir())
    except OSError:
        return out
    for node in nodes:
        props = dict(
            line.split(None, 1)
            for line in (probe.read(node / "properties") or "").splitlines()
            if len(line.split(None, 1)) == 2
        )
        gfx = gfx_name(props.get("gfx_target_version"))
        location = _int(props.get("location_id"))
        if gfx is None or location is None:
            continue
        domain = _int(props.get("domain")) or 0
        bus, devfn = location >> 8, location & 0xFF
        address = f"{domain:04x}:{bus:02x}:{devfn >> 3:02x}.{devfn & 7:x}"
        out[address] = gfx
    return out


def _device(
    *,
    index: int,
    name: str | None,
    device_id: int | None,
    gfx: str | None,
    memory_bytes: int | None,
    driver: str | None,
    bus_id: str | None,
    source: str,
) -> Device:
    known_name, known_gfx = KNOWN.get(device_id or -1, (None, None))
    details = {"pci_device_id": f"0x{device_id:04x}"} if device_id is not None else {}
    return Device(
        kind="rocm",
        vendor="AMD",
        name=name or known_name or "AMD GPU",
        memory_bytes=memory_bytes,
        arch=gfx or known_gfx or "unknown",
        driver=driver,
        index=index,
        source=source,
        bus_id=normal_bus_id(bus_id) if bus_id else None,
        details=details,
    )


def _json(text: str | None) -> dict[str, Any]:
    """The JSON object in a tool's output (rocm-smi may print warnings before it)."""
    if not text or "{" not in text:
        return {}
    try:
        data = json.loads(text[text.index("{") :])
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _field(info: dict[str, Any], key: str) -> str | None:
    """A rocm-smi field by case-insensitive key ("Card series" and "Card Series" both
    occur across versions)."""
    for k, v in info.items():
        if k.strip().lower() == key:
            return _known(v)
    return None


def _card_index(name: str) -> int:
    digits = name[4:]
    return int(digits) if digits.isdigit() else 0


def _known(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if not text or text.upper() in ("N/A", "NA", "UNKNOWN") else text


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip().lower()
    try:
        return int(text, 16) if text.startswith("0x") else int(text)
    except ValueError:
        return None


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None
