"""The whole offline install (acceptance, issue 17; slow: ~40 s of pip on 2 cores): a bundle
installed into a fresh venv by install.sh with no index, then `luminal --version`,
`luminal doctor` and a compile of the example model by the installed command; an upgrade
(the same bundle again) leaves LUMINAL_HOME as it was."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from luminal._version import __version__
from luminal.installers.bundle import BundleResult

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _offline_env(home: Path) -> dict[str, str]:
    """No index reachable for the installed luminal: every pip setting points nowhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(
        LUMINAL_HOME=str(home),
        PIP_NO_INDEX="1",
        PIP_INDEX_URL="http://127.0.0.1:9/unreachable",
        PIP_CONFIG_FILE=os.devnull,
    )
    return env


def test_install_run_doctor_compile_and_upgrade(
    built_bundle: BundleResult, licensed_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    shutil.copytree(licensed_home, home)
    env = _offline_env(home)
    prefix = tmp_path / "opt-luminal"
    install = ["sh", str(built_bundle.path / "install.sh"), "--prefix", str(prefix)]
    install += ["--python", sys.executable]
    # the operator's shell may have a PYTHONPATH with another luminal on it (a checkout's):
    # pip would take it as installed and doctor would run it; install.sh must install and
    # check the bundle's all the same
    shadow = tmp_path / "shadow"
    (shadow / "luminal").mkdir(parents=True)
    (shadow / "luminal" / "__init__.py").write_text("raise SystemExit('the shadow luminal')\n")
    info = shadow / f"luminal-{__version__}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: luminal\nVersion: {__version__}\n"
    )
    shell = {**env, "PYTHONPATH": str(shadow)}
    done = subprocess.run(install, capture_output=True, text=True, env=shell, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bundle OK" in done.stdout and "==> luminal doctor" in done.stdout
    luminal = prefix / "bin" / "luminal"
    venv = (prefix / "current").resolve()
    assert venv.parent == prefix and (venv / "bin" / "python").exists()
    # the installed luminal is the bundle's, not this checkout
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import luminal; print(luminal.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert str(venv) in where
    out = subprocess.run([luminal, "--version"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.startswith("luminal ")
    doctor = subprocess.run([luminal, "doctor", "--json"], capture_output=True, text=True, env=env)
    assert doctor.returncode == 0, doctor.stderr
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["packages"]["status"] == "ok" and checks["license"]["status"] == "ok"

    model = tmp_path / "mlp.onnx"
    subprocess.run(
        [sys.executable, "-m", "benchmarks.models", "--export", "mlp", "-o", str(model)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT.parent}:{ROOT}"},
    )
    art = tmp_path / "mlp.lmnl"
    compiled = subprocess.run(
        [luminal, "compile", model, "-o", art, "--budget", "0", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert compiled.returncode == 0, compiled.stderr
    assert json.loads(compiled.stdout)["check"]["status"] == "passed" and art.exists()

    # upgrade: install again; LUMINAL_HOME (license, key, tuning database) is untouched
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in home.iterdir()}
    again = subprocess.run(install, capture_output=True, text=True, env=env, timeout=900)
    assert again.returncode == 0, again.stderr
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in home.iterdir()}
    assert {k: v for k, v in after.items() if k != "clock.json"} == {
        k: v for k, v in before.items() if k != "clock.json"
    }


def test_a_torch_bundle_takes_the_pinned_cpu_build(tmp_path: Path, bundle_vendor: object) -> None:
    """`--extras torch` with a constraint pinning the CPU build (an unpinned torch resolves
    to the CUDA build and its several GB of NVIDIA wheels); from the configured index."""
    from luminal.errors import UsageError
    from luminal.installers import verify_bundle
    from luminal.installers.bundle import BundleSpec, build_bundle

    pin = tmp_path / "cpu-torch.txt"
    pin.write_text("torch==2.13.0+cpu\n")
    spec = BundleSpec(
        output=tmp_path / "b",
        signing_key=bundle_vendor.key_path,  # type: ignore[attr-defined]
        extras=("torch",),
        constraint=pin,
    )
    from tests.installers.conftest import as_release

    try:
        with as_release(bundle_vendor):  # type: ignore[arg-type]
            result = build_bundle(spec)
    except UsageError as err:
        pytest.skip(f"no torch 2.13.0+cpu wheel reachable: {err}")
    lock = (result.path / "requirements.lock").read_text()
    assert "torch==2.13.0+cpu --hash=sha256:" in lock and "nvidia" not in lock
    assert verify_bundle.verify(result.path)["manifest"]["extras"] == ["torch"]
