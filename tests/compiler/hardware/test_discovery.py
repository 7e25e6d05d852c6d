"""GPU and accelerator discovery against recorded machines (tests/fixtures/hardware/*):
each is a root with /proc, /sys and vendor tools that replay saved tool output (README there).
The expected values are read back from the recordings, not restated."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from luminal.compiler.hardware import Probe, amd, discover, nvidia, pci
from luminal.compiler.hardware.device import Device

MACHINES = Path(__file__).parents[2] / "fixtures" / "hardware"


def machine(name: str) -> Probe:
    return Probe.at(MACHINES / name)


def recorded(name: str, file: str) -> str:
    return (MACHINES / name / "usr" / "share" / "recorded" / file).read_text()


def test_nvidia_smi_h100() -> None:
    rows = list(
        csv.reader(
            recorded("dgx-h100", "nvidia-smi-query-gpu.csv").splitlines(), skipinitialspace=True
        )
    )
    gpus = nvidia.discover(machine("dgx-h100"))
    assert [g.name for g in gpus] == [r[1] for r in rows] == ["NVIDIA H100 80GB HBM3"] * 2
    for gpu, row in zip(gpus, rows, strict=True):
        assert gpu.kind == "cuda" and gpu.vendor == "NVIDIA" and gpu.source == "nvidia-smi"
        assert gpu.arch == "sm_90" and gpu.details["compute_capability"] == row[6]
        assert gpu.memory_bytes == int(row[4]) * 2**20
        assert gpu.driver == row[5] and gpu.details["uuid"] == row[2]
        assert gpu.bus_id == pci.normal_bus_id(row[3]) and gpu.bus_id.startswith("0000:")
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[0].fingerprint == gpus[1].fingerprint  # same part, other slot and uuid


def test_nvidia_smi_before_compute_cap_asks_again_and_knows_a100() -> None:
    (row,) = csv.reader(
        recorded("a100", "nvidia-smi-query-gpu.csv").splitlines(), skipinitialspace=True
    )
    (gpu,) = nvidia.discover(machine("a100"))
    assert gpu.name == row[1] == "NVIDIA A100-SXM4-40GB"
    assert gpu.arch == "sm_80" and gpu.details["compute_capability"] == "8.0"
    assert gpu.memory_bytes == int(row[4]) * 2**20 and gpu.driver == row[5]


class FakeNvml:
    """The calls luminal makes of pynvml, answering like NVML on an H200 machine."""

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init = fail_init
        self.shut = False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise OSError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"550.54.15"  # older bindings return bytes

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return 100 + i

    def nvmlDeviceGetName(self, h: int) -> str:
        return "NVIDIA H200"

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return (9, 0)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(total=150_754_820_096)

    def nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(busId=b"00000000:19:00.0")

    def nvmlDeviceGetUUID(self, h: int) -> str:
        raise RuntimeError("not supported")  # an optional field that fails is left out


def test_nvml_comes_first_and_shuts_down() -> None:
    nv = FakeNvml()
    probe = Probe.at(MACHINES / "dgx-h100", modules={"pynvml": nv})  # nvidia-smi is there too
    (gpu,) = nvidia.discover(probe)
    assert (gpu.name, gpu.arch, gpu.source, gpu.driver) == (
        "NVIDIA H200",
        "sm_90",
        "nvml",
        "550.54.15",
    )
    assert gpu.memory_bytes == 150_754_820_096 and gpu.bus_id == "0000:19:00.0"
    assert "uuid" not in gpu.details and nv.shut


def test_nvml_without_its_library_falls_back_to_nvidia_smi() -> None:
    probe = Probe.at(MACHINES / "dgx-h100", modules={"pynvml": FakeNvml(fail_init=True)})
    gpus = nvidia.discover(probe)
    assert len(gpus) == 2 and {g.source for g in gpus} == {"nvidia-smi"}


def test_rocm_smi_mi300x() -> None:
    product = json.loads(recorded("mi300x", "rocm-smi-productname.json"))
    memory = json.loads(recorded("mi300x", "rocm-smi-meminfo-vram.json"))
    gpus = amd.from_rocm_smi(machine("mi300x"))  # the tool also prints a warning first
    assert [g.name for g in gpus] == [product[c]["Card Series"] for c in ("card0", "card1")]
    for gpu, card in zip(gpus, ("card0", "card1"), strict=True):
        assert gpu.kind == "rocm" and gpu.vendor == "AMD" and gpu.source == "rocm-smi"
        assert gpu.arch == product[card]["GFX Version"] == "gfx942"
        assert gpu.memory_bytes == int(memory[card]["VRAM Total Memory (B)"])
        assert gpu.driver == "6.7.0"
    assert [g.bus_id for g in gpus] == ["0000:0c:00.0", "0000:22:00.0"]


def test_amd_sysfs_without_rocm() -> None:
    """No tools at all: the amdgpu driver's sysfs and the KFD topology say the same."""
    probe = Probe(MACHINES / "mi300x")
    gpus = amd.discover(probe)
    assert [g.source for g in gpus] == ["sysfs", "sysfs"]  # the ASPEED BMC card0 is not AMD
    by_tool = amd.from_rocm_smi(machine("mi300x"))
    for a, b in zip(gpus, by_tool, strict=True):
        assert (a.name, a.arch, a.memory_bytes, a.bus_id, a.driver) == (
            b.name,
            b.arch,
            b.memory_bytes,
            b.bus_id,
            b.driver,
        )
        assert a.fingerprint == b.fingerprint


def test_amdsmi_library() -> None:
    calls: list[str] = []
    am = SimpleNamespace(
        amdsmi_init=lambda: calls.append("init"),
        amdsmi_shut_down=lambda: calls.append("shut"),
        amdsmi_get_processor_handles=lambda: ["h0"],
        amdsmi_get_gpu_asic_info=lambda h: {
            "market_name": "AMD Instinct MI300X",
            "vendor_id": "0x1002",
            "device_id": "0x74a1",
            "target_graphics_version": "gfx942",
        },
        amdsmi_get_gpu_vram_info=lambda h: {"vram_type": "HBM3", "vram_size": 196288},
        amdsmi_get_gpu_driver_info=lambda h: {"driver_name": "amdgpu", "driver_version": "6.8.5"},
        amdsmi_get_gpu_device_bdf=lambda h: "0000:0c:00.0",
    )
    (gpu,) = amd.discover(Probe.at(MACHINES / "mi300x", modules={"amdsmi": am}))
    assert (gpu.name, gpu.arch, gpu.source, gpu.driver) == (
        "AMD Instinct MI300X",
        "gfx942",
        "amdsmi",
        "6.8.5",
    )
    assert gpu.memory_bytes == 196288 * 2**20 and calls == ["init", "shut"]


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("gfx942", "gfx942"),
        ("GFX940", "gfx940"),
        (90402, "gfx942"),
        ("90010", "gfx90a"),  # KFD's form for MI200
        ("gfx9010", "gfx90a"),  # rocm-smi's spelling of the same
        ("gfx90a:sramecc+:xnack-", "gfx90a"),
        (110000, "gfx1100"),
        (0, None),
        ("N/A", None),
    ],
)
def test_gfx_names(value: object, name: str | None) -> None:
    assert amd.gfx_name(value) == name


def test_pci_accelerators() -> None:
    found = pci.accelerators(machine("accel"))
    by_bus = {d.bus_id: d for d in found}
    # The NIC and the known-vendor NIC (Amazon ENA) are not accelerators.
    assert set(by_bus) == {"0000:5e:00.0", "0000:af:00.0"}
    wormhole = by_bus["0000:af:00.0"]
    assert wormhole.name == pci.KNOWN_DEVICES[(0x1E52, 0x401E)] and wormhole.driver == "tenstorrent"
    assert wormhole.vendor == pci.ACCELERATOR_VENDORS[0x1E52]
    assert by_bus["0000:5e:00.0"].name == "unknown accelerator feed:5a01"
    # AMD's MI300X is a processing accelerator on the bus, but GPU discovery owns it.
    assert pci.accelerators(machine("mi300x")) == []


def test_whole_machines() -> None:
    kinds = {
        name: sorted(d.kind for d in discover(machine(name)))
        for name in ("dgx-h100", "a100", "mi300x", "accel")
    }
    assert kinds == {
        "dgx-h100": ["cpu", "cuda", "cuda"],
        "a100": ["cpu", "cuda"],
        "mi300x": ["cpu", "rocm", "rocm"],
        "accel": ["accelerator", "accelerator", "cpu"],
    }
    (cpu,) = [d for d in discover(machine("accel")) if d.kind == "cpu"]
    assert cpu.name == "AMD EPYC 9R14 96-Core Processor" and "avx512f" in cpu.details["features"]


def test_an_empty_machine_is_just_a_cpu(tmp_path: Path) -> None:
    (only,) = discover(Probe.at(tmp_path))
    assert only.kind == "cpu"


def test_a_hung_tool_counts_as_absent(tmp_path: Path) -> None:
    bin_dir = tmp_path / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\nexec sleep 30\n")
    tool.chmod(0o755)
    probe = Probe(tmp_path, (str(bin_dir),), timeout_s=0.3)
    assert nvidia.discover(probe) == []


def test_from_env_and_vendor_libraries_only_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = Probe.from_env({"LUMINAL_HARDWARE_ROOT": str(MACHINES / "a100"), "PATH": "/usr/bin"})
    assert probe.root == MACHINES / "a100" and not probe.is_host
    assert probe.tools[0] == str(MACHINES / "a100" / "usr" / "bin")  # not the host's PATH
    assert probe.module("json") is None  # a recorded machine has no driver to talk to
    host = Probe.from_env({"PATH": os.pathsep.join(["/a", "/b"])})
    assert host.is_host and host.tools[:2] == ("/a", "/b") and host.module("json") is json


def test_fingerprint_ignores_driver_slot_and_memory_but_not_the_part() -> None:
    a = Device(
        "cuda",
        "NVIDIA",
        "NVIDIA H100 80GB HBM3",
        80 << 30,
        "sm_90",
        driver="535",
        bus_id="0000:18:00.0",
    )
    b = Device(
        "cuda",
        "NVIDIA",
        "NVIDIA H100 80GB HBM3",
        79 << 30,
        "sm_90",
        driver="550",
        bus_id="0000:2a:00.0",
        index=1,
    )
    c = Device("cuda", "NVIDIA", "NVIDIA H100 80GB HBM3", 80 << 30, "sm_89")
    assert a.fingerprint == b.fingerprint != c.fingerprint


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("00000000:3B:00.0", "0000:3b:00.0"),
        ("0000:3b:00.0", "0000:3b:00.0"),
        ("3b:00.0", "0000:3b:00.0"),
    ],
)
def test_bus_ids(text: str, normal: str) -> None:
    assert pci.normal_bus_id(text) == normal
