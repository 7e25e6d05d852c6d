"""`luminal devices` and `--target` on recorded machines (tests/fixtures/hardware)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MACHINES = Path(__file__).parents[1] / "fixtures" / "hardware"

EXPECTED = {  # kind, name, arch, memory in bytes, as the recorded tools report them
    "dgx-h100": [("cuda", "NVIDIA H100 80GB HBM3", "sm_90", 81559 << 20)] * 2,
    "a100": [("cuda", "NVIDIA A100-SXM4-40GB", "sm_80", 40960 << 20)],
    "mi300x": [("rocm", "AMD Instinct MI300X", "gfx942", 205822885888)] * 2,
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gpu_machines(name: str, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LUMINAL_HARDWARE_ROOT", str(MACHINES / name))
    rc, out, err = cli("devices", "--json")
    assert rc == 0, err
    devices = json.loads(out)["devices"]
    gpus = [
        (d["kind"], d["name"], d["arch"], d["memory_bytes"]) for d in devices if d["kind"] != "cpu"
    ]
    assert gpus == EXPECTED[name]  # each once, whether or not a GPU backend also found it
    assert len({d["bus_id"] for d in devices if d["bus_id"]}) == len(gpus)
    (cpu,) = [d for d in devices if d["kind"] == "cpu"]
    assert cpu["target"] == "cpu" and cpu["logical_cores"] == 2 and "avx512f" in cpu["simd"]
    rc, table, _ = cli("devices")
    assert rc == 0 and EXPECTED[name][0][1].split()[1] in table


def test_this_machine_has_a_cpu_target(cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = cli("devices", "--json")
    data = json.loads(out)
    assert rc == 0 and data["devices"][0]["kind"] == "cpu" and data["devices"][0]["target"] == "cpu"
    assert {"cpu", "cuda", "rocm"} <= {t["name"] for t in data["targets"]}


def test_unknown_target_is_a_usage_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = cli("compile", tmp_path / "m.onnx", "--target", "tpu")
    assert rc == 2 and err.startswith("error: unknown target 'tpu'; known targets: auto, cpu")
