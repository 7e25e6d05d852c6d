"""The backend registry (built-ins + `luminal.backends` entry points) and `--target`."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

from luminal.compiler.artifact import read_artifact
from luminal.compiler.backends.cpu.backend import CpuBackend
from luminal.compiler.backends.registry import BUILTIN, BackendEntry, Registry
from luminal.compiler.backends.target import license_name, resolve
from luminal.compiler.ir import interpreter
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.compiler.runtime.session import open_artifact
from luminal.errors import CompilerError, UsageError
from tests.helpers.backends import Broken, FakeBackend, GraphExecutable, device

HELPERS = "tests.helpers.backends"


def ep(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group="luminal.backends")


def registry(*backends: object) -> Registry:
    """A registry of the given backend objects, after the real CPU backend."""
    entries = [BackendEntry("cpu", BUILTIN["cpu"], "built-in", CpuBackend)]
    entries += [BackendEntry(b.name, "test", "test", lambda b=b: b) for b in backends]  # type: ignore[attr-defined]
    return Registry(entries)


def test_installed_has_the_builtins_and_the_cpu_is_here() -> None:
    reg = Registry.installed()
    assert {"cpu", "cuda", "rocm"} <= set(reg.names())
    cpu = reg.get("cpu")
    assert isinstance(cpu, CpuBackend) and reg.get("cpu") is cpu  # imported once
    (d,) = cpu.discover()
    assert d.kind == "cpu" and int(d.details["logical_cores"]) >= 1


def test_entry_point_plugins_load_lazily() -> None:
    reg = Registry.installed([ep("fake", f"{HELPERS}:FakeBackend")])
    assert reg.entry("fake").origin == "plugin"
    backend = reg.get("fake")
    assert isinstance(backend, FakeBackend) and backend.name == "fake"


def test_duplicate_names_are_refused() -> None:
    reg = Registry.installed(
        [
            ep("fake", f"{HELPERS}:FakeBackend"),
            ep("fake", "other_package:Backend"),
            ep("cpu", "evil:Backend"),
            ep("same", f"{HELPERS}:FakeBackend"),
            ep("same", f"{HELPERS}:FakeBackend"),  # one distribution seen twice on sys.path
        ]
    )
    with pytest.raises(UsageError, match="claimed by more than one plugin"):
        reg.get("fake")
    assert isinstance(reg.get("cpu"), CpuBackend)  # a plugin cannot replace a built-in
    problems = " ".join(reg.problems())
    assert "'fake'" in problems and "'cpu'" in problems and "the built-in is used" in problems
    assert reg.entry("same").value == f"{HELPERS}:FakeBackend"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("no_such_module_xyz:Backend", "failed to load: No module named 'no_such_module_xyz'"),
        (f"{HELPERS}:NOT_A_BACKEND", "is not a luminal backend"),
        (f"{HELPERS}:Broken", "calls itself 'broken'"),
    ],
)
def test_bad_plugins_are_one_line(value: str, message: str) -> None:
    reg = Registry.installed([ep("plug", value)])
    with pytest.raises(UsageError, match=message) as info:
        reg.get("plug")
    assert "\n" not in str(info.value)


def test_unknown_target_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown target 'tpu'; known targets: auto, cpu"):
        resolve("tpu", registry(FakeBackend()))


def test_auto_picks_the_present_device_with_the_highest_priority() -> None:
    absent = FakeBackend("absent", priority=90)
    npu = FakeBackend("npu1", priority=50, devices=[device("npu", "N1")])
    low = FakeBackend("npu2", priority=5, devices=[device("npu", "N2")])
    t = resolve("auto", registry(absent, npu, low))
    assert t.backend is npu and t.device is not None and t.device.name == "N1"
    assert resolve("auto", registry(absent)).name == "cpu"  # the CPU is always here


def test_auto_survives_a_plugin_whose_discovery_crashes() -> None:
    t = resolve("auto", registry(Broken()))
    assert t.name == "cpu"
    assert any("broken: discovery failed: driver exploded with a second line" in n for n in t.notes)


def test_forced_target_without_its_device() -> None:
    codegen_only = FakeBackend("npu1", needs_device=False)
    t = resolve("npu1", registry(codegen_only))
    assert t.device is None and "without one" in t.notes[0]
    with pytest.raises(UsageError, match=r"target 'npu1': no npu device on this machine"):
        resolve("npu1", registry(FakeBackend("npu1", needs_device=True)))


def test_license_names_and_kind_prefixed_targets() -> None:
    systolic = FakeBackend("systolic", kind="asic", devices=[device("asic", "SA")])
    reg = registry(systolic)
    assert resolve("asic:systolic", reg).backend is systolic
    assert license_name(systolic) == "asic:systolic"
    assert license_name(CpuBackend()) == "cpu"
    with pytest.raises(UsageError, match="unknown target 'npu:systolic'"):
        resolve("npu:systolic", reg)


def test_compile_and_run_through_a_plugin_backend(tmp_path: Path, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    """compile_model hands the schedule to the backend, writes its members and target
    record, and luminal's runtime gives the artifact back to the same backend."""
    from luminal.compiler.frontend import load_model

    path, feeds = suite_onnx("mlp")
    model = load_model(path, {})
    fake = FakeBackend("npu1", devices=[device("npu", "N1")])
    fake.load = lambda manifest, members: GraphExecutable(model.graph)  # type: ignore[method-assign]
    reg = registry(fake)
    out = tmp_path / "mlp.lmnl"
    result = compile_model(model, out, CompileOptions(target="auto"), target=resolve("auto", reg))
    assert result.target == "npu1" and result.device == "N1" and fake.compiled_for[0].name == "N1"  # type: ignore[union-attr]
    assert result.check is not None and result.check.status.value == "passed"
    art = read_artifact(out)
    target = art.manifest.target
    assert (target["kind"], target["backend"], target["device"]["name"]) == ("npu", "npu1", "N1")
    assert art.manifest.options["target"] == "npu1" and art.manifest.notes == {"kernels": 3}
    assert set(art.members) == {"kernels.txt"}
    session = open_artifact(out, art, reg)
    got = session.run(feeds)
    want = interpreter.run(model.graph, feeds)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    with pytest.raises(UsageError, match="missing input 'x'"):
        session.run({})


def test_a_backend_that_crashes_or_lies_is_a_compiler_error(tmp_path: Path, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    from luminal.compiler.frontend import load_model

    model = load_model(suite_onnx("mlp")[0], {})
    crash = FakeBackend("npu1", devices=[device("npu", "N1")])
    crash.codegen = lambda *a: 1 / 0  # type: ignore[method-assign, assignment]
    out = tmp_path / "x.lmnl"
    with pytest.raises(
        CompilerError, match="target 'npu1': code generation failed: division by zero"
    ):
        compile_model(model, out, target=resolve("npu1", registry(crash)))
    liar = FakeBackend("npu1", devices=[device("npu", "N1")])
    built = liar.build
    liar.build = lambda *a: type(built(*a))({"kind": "cpu", "backend": "cpu"}, {})  # type: ignore[method-assign]
    with pytest.raises(CompilerError, match="it must be"):
        compile_model(model, out, target=resolve("npu1", registry(liar)))
    assert not out.exists()


def test_cpu_backend_stages_and_load(tmp_path: Path, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    """The CPU backend's stages one by one: codegen, build, load what the pipeline wrote."""
    from luminal.compiler.backends.protocol import Request
    from luminal.compiler.frontend import load_model
    from luminal.compiler.schedule import schedule

    path, feeds = suite_onnx("mlp")
    model = load_model(path, {})
    out = tmp_path / "mlp.lmnl"
    compile_model(model, out, CompileOptions(target="cpu"))
    art = read_artifact(out)
    cpu = CpuBackend()
    exe = cpu.load(art.manifest, art.members)
    want = interpreter.run(model.graph, feeds)
    np.testing.assert_allclose(exe.run(feeds)["y"], want["y"], rtol=1e-4, atol=1e-5)
    request = Request(schedule(model.graph))
    sources = cpu.codegen(request)
    assert "lum_run" in sources["model.c"]
    built = cpu.build(request, sources)
    assert built.target["backend"] == "cpu" and set(built.members) == {
        "model.so",
        "weights.bin",
        "model.c",
    }


def test_a_builtin_is_found_without_reading_every_plugin() -> None:
    """Opening a CPU artifact must not scan every installed distribution's metadata; a
    plugin's name, the list of names and the clashes do read them, once."""
    reads: list[int] = []

    def pending() -> list[EntryPoint]:
        reads.append(1)
        return [ep("fake", f"{HELPERS}:FakeBackend"), ep("cpu", "evil:Backend")]

    entries = [BackendEntry(n, v, "built-in", lambda: CpuBackend) for n, v in BUILTIN.items()]
    reg = Registry(entries, pending=pending)
    assert isinstance(reg.get("cpu"), CpuBackend) and reads == []
    assert isinstance(reg.get("fake"), FakeBackend) and reads == [1]
    assert "fake" in reg.names() and len(reg.problems()) == 1 and reads == [1]
