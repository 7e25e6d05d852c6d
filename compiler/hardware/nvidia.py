"""NVIDIA GPUs: NVML (the `nvidia-ml-py` binding) first, `nvidia-smi` when NVML is absent.

Both read the same driver, so the first that answers is used.  Each GPU becomes a
`Device` of kind "cuda" whose arch is its compute capability as the compilers spell it
("sm_90" for 9.0), which is what generated code depends on.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from luminal.compiler.hardware.device import Device
from luminal.compiler.hardware.pci import normal_bus_id
from luminal.compiler.hardware.probe import Probe

QUERY = ("index", "name", "uuid", "pci.bus_id", "memory.total", "driver_version", "compute_cap")
MIB = 1 << 20

#: Compute capability by product family, for drivers whose nvidia-smi cannot report it
#: (`compute_cap` arrived with driver 510).  Matched against the name's words.
CAPABILITY_BY_NAME = (
    ("GB200", (10, 0)),
    ("B200", (10, 0)),
    ("H200", (9, 0)),
    ("H100", (9, 0)),
    ("H800", (9, 0)),
    ("GH200", (9, 0)),
    ("L40S", (8, 9)),
    ("L40", (8, 9)),
    ("L4", (8, 9)),
    ("A100", (8, 0)),
    ("A800", (8, 0)),
    ("A30", (8, 0)),
    ("A10", (8, 6)),
    ("T4", (7, 5)),
    ("V100", (7, 0)),
)


def discover(probe: Probe) -> list[Device]:
    """The NVIDIA GPUs of the probed machine; [] when there are none or no driver."""
    nvml = probe.module("pynvml")
    if nvml is not None:
        found = from_nvml(nvml)
        if found is not None:
            return found
    text = probe.run(
        "nvidia-smi", [f"--query-gpu={','.join(QUERY)}", "--format=csv,noheader,nounits"]
    )
    if text is None:  # drivers before 510 reject compute_cap: ask again without it
        text = probe.run(
            "nvidia-smi", [f"--query-gpu={','.join(QUERY[:-1])}", "--format=csv,noheader,nounits"]
        )
    return parse_nvidia_smi(text) if text else []


def from_nvml(nv: Any) -> list[Device] | None:
    """GPUs through NVML, or None when NVML cannot start (no driver library)."""
    try:
        nv.nvmlInit()
    except Exception:
        return None
    try:
        driver = _str(_try(nv.nvmlSystemGetDriverVersion))
        devices = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            cc = _try(nv.nvmlDeviceGetCudaComputeCapability, h)
            memory = _try(nv.nvmlDeviceGetMemoryInfo, h)
            pci = _try(nv.nvmlDeviceGetPciInfo, h)
            bus = _str(getattr(pci, "busId", None)) if pci is not None else None
            devices.append(
                _device(
                    index=i,
                    name=_str(nv.nvmlDeviceGetName(h)) or "NVIDIA GPU",
                    memory_bytes=int(memory.total) if memory is not None else None,
                    capability=(int(cc[0]), int(cc[1])) if cc else None,
                    driver=driver,
                    bus_id=bus,
                    uuid=_str(_try(nv.nvmlDeviceGetUUID, h)),
                    source="nvml",
                )
            )
        return devices
    except Exception:
        return None
    finally:
        _try(nv.nvmlShutdown)


def parse_nvidia_smi(text: str) -> list[Device]:
    """Rows of `nvidia-smi --query-gpu=<QUERY> --format=csv,noheader,nounits`."""
    devices = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if len(row) < 6:
            continue
        fields = dict(zip(QUERY, (c.strip() for c in row), strict=False))
        cc = _capability(fields.get("compute_cap"))
        memory = _number(fields["memory.total"])
        devices.append(
            _device(
                index=int(_number(fields["index"]) or len(devices)),
                name=fields["name"],
                memory_bytes=int(memory * MIB) if memory is not None else None,
                capability=cc,
                driver=_known(fields["driver_version"]),
                bus_id=_known(fields["pci.bus_id"]),
                uuid=_known(fields["uuid"]),
                source="nvidia-smi",
            )
        )
    return devices


def _device(
    *,
    index: int,
    name: str,
    memory_bytes: int | None,
    capability: tuple[int, int] | None,
    driver: str | None,
    bus_id: str | None,
    uuid: str | None,
    source: str,
) -> Device:
    cc = capability or _capability_by_name(name)
    details = {"compute_capability": f"{cc[0]}.{cc[1]}"} if cc else {}
    if uuid:
        details["uuid"] = uuid
    return Device(
        kind="cuda",
        vendor="NVIDIA",
        name=name,
        memory_bytes=memory_bytes,
        arch=f"sm_{cc[0]}{cc[1]}" if cc else "unknown",
        driver=driver,
        index=index,
        source=source,
        bus_id=normal_bus_id(bus_id) if bus_id else None,
        details=details,
    )


def _capability(text: str | None) -> tuple[int, int] | None:
    major, dot, minor = (text or "").partition(".")
    if dot and major.isdigit() and minor.isdigit():
        return int(major), int(minor)
    return None


def _capability_by_name(name: str) -> tuple[int, int] | None:
    tokens = set(name.upper().replace("-", " ").split())
    return next((cc for key, cc in CAPABILITY_BY_NAME if key in tokens), None)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _known(text: str) -> str | None:
    return None if not text or text.startswith("[") or text in ("N/A", "Not Supported") else text


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None
