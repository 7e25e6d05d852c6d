"""The reference ASIC plugin (examples/luminal-systolic), installed the way a vendor's
would be: pip builds it and installs it into a folder on sys.path, and luminal finds it
only through its `luminal.backends` entry point.  Its simulated device is "present" on
the recorded machine tests/fixtures/hardware/accel (a PCI device with its fake ids)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import luminal
from luminal.compiler.backends.registry import Registry
from luminal.compiler.backends.target import resolve
from luminal.compiler.ir import interpreter
from luminal.errors import ArtifactIncompatible

ROOT = Path(__file__).parents[3]
PLUGIN = ROOT / "examples" / "luminal-systolic"
ACCEL = ROOT / "tests" / "fixtures" / "hardware" / "accel"


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin built from a copy of its source and installed into a private folder."""
    tmp = tmp_path_factory.mktemp("systolic")
    src, site = tmp / "src", tmp / "site"
    shutil.copytree(PLUGIN, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--target", str(site), str(src)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return site


@pytest.fixture
def plugin(plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(plugin_site))
    monkeypatch.setenv("LUMINAL_HARDWARE_ROOT", str(ACCEL))
    return plugin_site


@pytest.fixture(scope="module")
def asic_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LUMINAL_HOME licensed to compile for cpu and any asic."""
    from typer.testing import CliRunner

    from luminal.cli.app import app
    from tests.helpers.licensing_helpers import Vendor, make_terms

    root = tmp_path_factory.mktemp("asic-licensed")
    vendor = Vendor.create(root / "vendor")
    lic = vendor.write_license(
        root / "license.json", None, terms=make_terms(targets=("cpu", "asic"))
    )
    runner = CliRunner(env={"LUMINAL_HOME": str(root / "home")})
    for args in (
        ["license", "trust", str(vendor.pub_path), "--evaluation"],
        ["license", "install", str(lic)],
    ):
        assert runner.invoke(app, args).exit_code == 0
    return root / "home"


@pytest.fixture(scope="module")
def mlp_artifact(
    tmp_path_factory: pytest.TempPathFactory, suite_onnx, asic_home, plugin_site
) -> Path:  # type: ignore[no-untyped-def]
    """mlp compiled for the systolic target through the CLI."""
    from tests.conftest import Cli

    out = tmp_path_factory.mktemp("sys-mlp") / "mlp.lmnl"
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(plugin_site))
        mp.setenv("LUMINAL_HOME", str(asic_home))
        mp.setenv("LUMINAL_HARDWARE_ROOT", str(ACCEL))
        rc, _, err = Cli()("compile", suite_onnx("mlp")[0], "--target", "systolic", "-o", out)
        assert rc == 0, err
        rc, _, err = Cli()("artifact-key", "export", "-o", out.with_suffix(".key.json"))
    assert rc == 0, err
    # The tests run it from the session's home: trust the building install's key there.
    rc, _, err = Cli()("artifact-key", "trust", out.with_suffix(".key.json"))
    assert rc == 0, err
    return out


def test_found_through_its_entry_point(plugin: Path) -> None:
    reg = Registry.installed()
    assert reg.entry("systolic").origin == "plugin luminal-systolic 0.1.0"
    backend = reg.get("systolic")
    assert (backend.kind, backend.priority) == ("asic", 10)
    assert type(backend).__module__ == "luminal_systolic.backend"


def test_devices_lists_the_accelerator(plugin: Path, cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, err = cli("devices", "--json")
    assert rc == 0, err
    data = json.loads(out)
    by_bus = {d["bus_id"]: d for d in data["devices"] if d["bus_id"]}
    sa = by_bus["0000:5e:00.0"]  # claimed by the plugin: no "unknown accelerator" row
    assert (sa["kind"], sa["target"], sa["arch"]) == ("asic", "systolic", "sa128")
    assert by_bus["0000:af:00.0"]["target"] is None  # Tenstorrent: no backend installed
    assert [d["kind"] for d in data["devices"]].count("cpu") == 1
    (t,) = [t for t in data["targets"] if t["name"] == "systolic"]
    assert t["devices"] == 1 and t["origin"].startswith("plugin luminal-systolic")
    assert resolve("auto").name == "systolic"  # no GPU on this machine: the ASIC wins


def test_mlp_runs_on_the_simulator(plugin: Path, mlp_artifact: Path, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx("mlp")
    from luminal.compiler.frontend import load_model

    graph = load_model(path, {}).graph
    session = luminal.load(mlp_artifact)
    got = session.run(feeds)
    want = interpreter.run(graph, feeds)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-5)
    manifest = session.manifest
    target, notes = manifest.target, manifest.notes
    assert (target["kind"], target["backend"], target["arch"]) == ("asic", "systolic", "sa128")
    assert target["device"]["bus_id"] == "0000:5e:00.0"
    # Three 8x512 @ 512x512 layers: the array's work is exactly the model's.
    assert notes["macs"] == 3 * 8 * 512 * 512 and notes["cycles"] > 0
    assert session.executable.seconds() == notes["estimated_seconds"]


def test_cli_run_against_onnx_runtime(plugin: Path, mlp_artifact: Path, cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, err = cli("run", mlp_artifact, "--compare", "onnxruntime", "--json")
    assert rc == 0, err
    assert json.loads(out)["parity"]["ok"] is True


def test_without_the_device_it_compiles_but_does_not_run(
    plugin: Path,
    mlp_artifact: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli,
    asic_home: Path,
    suite_onnx,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setenv("LUMINAL_HARDWARE_ROOT", str(tmp_path))  # a machine with no PCI devices
    with pytest.raises(ArtifactIncompatible, match="there is none on this machine"):
        luminal.load(mlp_artifact)
    rc, _, err = cli("run", mlp_artifact)
    assert rc == 6 and err.count("\n") == 1 and "systolic accelerator" in err
    monkeypatch.setenv("LUMINAL_HOME", str(asic_home))
    out = tmp_path / "cross.lmnl"
    rc, _, err = cli("compile", suite_onnx("mlp")[0], "--target", "asic:systolic", "-o", out)
    assert rc == 0 and "no asic device here" in err
    assert luminal.compiler.artifact.read_artifact(out).manifest.target["device"] is None


def test_what_the_chip_cannot_run_is_one_line(
    plugin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli, asic_home: Path
) -> None:  # type: ignore[no-untyped-def]
    import onnx
    from onnx import TensorProto, helper

    monkeypatch.setenv("LUMINAL_HOME", str(asic_home))
    graph = helper.make_graph(
        [helper.make_node("ReduceMax", ["x"], ["y"], keepdims=0)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    model = tmp_path / "rmax.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), model)
    out = tmp_path / "rmax.lmnl"
    rc, _, err = cli("compile", model, "--target", "systolic", "-o", out)
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert rc == 6 and "RMAX" in line and "Traceback" not in err
    assert not out.exists()


def test_licenses_name_the_asic_target(plugin: Path, suite_onnx, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The default test home licenses the built-in targets only.
    rc, _, err = cli(
        "compile", suite_onnx("mlp")[0], "--target", "systolic", "-o", tmp_path / "m.lmnl"
    )
    assert rc == 3 and "'asic:systolic'" in err


def test_program_encoding_and_memory_bounds(plugin: Path, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    from luminal_systolic import isa
    from luminal_systolic.lower import lower
    from luminal_systolic.simulator import Machine, SimulatorFault

    from luminal.compiler.frontend import load_model
    from luminal.compiler.schedule import schedule

    sched = schedule(load_model(suite_onnx("mlp")[0], {}).graph)
    lowered = lower(sched)
    blob = isa.encode(lowered.program)
    assert isa.decode(blob) == lowered.program
    for bad in (blob[:-3], blob + b"\0", b"XXXX" + blob[4:]):
        with pytest.raises(isa.DecodeError):
            isa.decode(bad)
    weights = np.frombuffer(lowered.weights, np.float32)
    with pytest.raises(SimulatorFault, match="outside its memory region"):
        Machine(lowered.program, weights[:1000], sched.arena_bytes // 4, [8 * 512], [8 * 512])
