"""benchmarks/gpu_check: the whole path in its dry run (the mlp compiled for cuda, run in
Triton's interpreter, checked against ONNX Runtime, timed beside ORT and torch on the
CPU), and the one clear line, exit 2, where there is no NVIDIA GPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Not imported here: triton imported without TRITON_INTERPRET stays so for the whole
# session, and the Triton backend's tests need it set first (their conftest does it).
MISSING = [m for m in ("torch", "triton", "onnxruntime") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)}")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


def gpu_check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m benchmarks.gpu_check ARGS` in a fresh process (TRITON_INTERPRET must be
    set before triton is imported, which this process may have done already)."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_check", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # heavy (10-25 s): make slow
def test_the_dry_run_takes_the_mlp_through_the_whole_path(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    done = gpu_check("--dry-run", "--duration", "0.3", "--min-rounds", "3", "--json", str(out))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("| model | ORT-CUDA ms | torch ms | luminal ms |")
    assert [row.split("|")[1].strip() for row in lines[2:4]] == ["mlp", "geomean"]
    assert "OK" in lines[2] and any(line.startswith("DRY RUN") for line in lines)
    data = json.loads(out.read_text())
    assert data["meta"]["dry_run"] is True and data["meta"]["gpu"] is None
    (result,) = data["results"]
    assert result["model"] == "mlp" and result["rounds"] >= 3
    assert set(result["arms"]) == {"onnxruntime-cuda", "torch-cuda", "luminal"}
    for arm in result["arms"].values():
        assert arm["median_ms"] > 0 and len(arm["samples_ms"]) >= 3
    parity = result["parity_luminal"]
    assert parity["ok"] and parity["max_abs"] < 1e-4  # against ORT's CPU provider


def test_without_a_gpu_the_python_part_says_so_in_one_line() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    # TRITON_INTERPRET left set does not turn a GPU run into an interpreted one
    done = gpu_check("--models", "mlp", env={"TRITON_INTERPRET": "1"})
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines()[-1].startswith("gpu_check: no NVIDIA GPU")


def test_without_nvidia_smi_the_script_stops_before_installing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        env={"PATH": str(tmp_path), "LUMINAL_GPU_VENV": str(venv)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        done.stderr
        == "gpu_check: no NVIDIA GPU here: nvidia-smi is not installed (--dry-run runs without one)\n"
    )
    assert not venv.exists()


def test_an_nvidia_smi_listing_no_gpu_stops_the_script_too(tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    fake.chmod(0o755)
    done = subprocess.run(
        ["/bin/bash", str(SCRIPT), "--models", "mlp"],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "LUMINAL_GPU_VENV": str(tmp_path / "venv")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "gpu_check: no NVIDIA GPU here: nvidia-smi lists none (--dry-run runs without one)"
    ]
