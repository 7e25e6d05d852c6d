"""The cuda and rocm backends as the compiler sees them: protocol, target record,
loading (with and without a GPU), timing, the whole pipeline, and the generated kernels
compiled by Triton's real compiler for GPUs that are not here."""

# ruff: noqa: E402  (TRITON_INTERPRET must be set before anything imports triton)
from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import inspect
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import luminal
from luminal.compiler.backends.protocol import Backend, Request
from luminal.compiler.backends.triton import CUDA_BACKEND, ROCM_BACKEND, TritonBackend
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.hardware.device import Device
from luminal.compiler.ir import DType, Graph, GraphBuilder, Op, interpreter
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.compiler.schedule import schedule
from luminal.errors import ArtifactIncompatible, UsageError
from tests.compiler.backends.triton.tritontest import (
    BACKENDS,
    aot_in_subprocess,
    assert_matches,
    build,
    manifest,
)

SNAPSHOTS = Path(__file__).parent / "snapshots"
rng = np.random.default_rng(11)


def _model() -> Graph:
    """One kernel of each kind: gather (elementwise), contraction + epilogue, reduce +
    epilogue, scatter, and a bool output."""
    b = GraphBuilder()
    ids = b.input("ids", (6,), DType.I64)
    emb = b.gather(b.const(rng.standard_normal((9, 16)).astype(np.float32)), ids, 0)  # 6x16
    w = b.const(rng.standard_normal((16, 24)).astype(np.float32))
    full = (6, 16, 24)
    prod = b.binary(
        Op.MUL,
        b.expand(b.reshape(emb, (6, 16, 1)), full),
        b.expand(b.reshape(w, (1, 16, 24)), full),
    )
    h = b.reshape(b.reduce(Op.SUM, prod, (1,)), (6, 24))
    h = b.binary(Op.MAX, h, b.expand(b.reshape(b.const(np.float32(0)), (1, 1)), (6, 24)))
    total = b.reduce(Op.SUM, h, (1,))
    scaled = b.unary(
        Op.SQRT,
        b.binary(Op.ADD, total, b.expand(b.reshape(b.const(np.float32(1)), (1, 1)), (6, 1))),
    )
    slots = b.input("slots", (6, 1), DType.I64)
    out = b.scatter(h, slots, scaled, 1)
    flag = b.binary(Op.CMPLT, total, b.expand(b.reshape(b.const(np.float32(3)), (1, 1)), (6, 1)))
    return b.build({"out": out, "flag": flag})


def _feeds() -> dict[str, np.ndarray]:
    return {
        "ids": np.array([0, 3, 8, 3, 1, 7], np.int64),
        "slots": np.array([[0], [5], [23], [1], [2], [9]], np.int64),
    }


@pytest.mark.parametrize(
    ("be", "kind", "priority"), [(CUDA_BACKEND, "cuda", 30), (ROCM_BACKEND, "rocm", 20)]
)
def test_backends_satisfy_the_protocol(be: TritonBackend, kind: str, priority: int) -> None:
    assert isinstance(be, Backend)
    assert (be.name, be.kind, be.priority) == (kind, kind, priority)
    caps = be.capabilities(None)
    assert not caps.needs_device_to_compile
    assert set(caps.kernel_kinds) == {"elementwise", "reduce", "contraction", "scatter"}
    assert "f32" in caps.dtypes and "bf16" in caps.dtypes
    assert all(d.kind == kind for d in be.discover())  # none on a machine without the GPU


def test_the_registry_names_them() -> None:
    registry = pytest.importorskip("luminal.compiler.backends.registry")
    reg = registry.Registry.installed()
    for kind in ("cuda", "rocm"):
        be = reg.get(kind)
        assert isinstance(be, TritonBackend) and be.kind == kind


@pytest.mark.parametrize(("kind", "arch"), [("cuda", "sm_90"), ("rocm", "gfx942")])
def test_compile_without_a_device_records_the_default_arch(kind: str, arch: str) -> None:
    sched = schedule(_model())
    built = build(BACKENDS[kind], sched)
    t = built.target
    assert (t["kind"], t["backend"], t["arch"], t["arch_source"]) == (kind, kind, arch, "default")
    assert t["triton"] == triton.__version__
    assert t["input_precision"] == "ieee" and t["cuda_graph"] is True
    assert set(built.members) == {"model.py", "weights.bin"}
    assert f"for {kind} {arch}" in built.members["model.py"].decode()
    blob = built.members["weights.bin"]
    assert len(blob) == sched.weights_bytes
    for node, offset in sched.weights:
        data = np.ascontiguousarray(sched.weight_array(node)).tobytes()
        assert blob[offset : offset + len(data)] == data


def test_compile_for_a_device_records_its_arch() -> None:
    a100 = Device("cuda", "NVIDIA", "NVIDIA A100-SXM4-80GB", 80 << 30, "sm_80", source="nvml")
    built = build(CUDA_BACKEND, schedule(_model()), a100)
    assert (built.target["arch"], built.target["arch_source"]) == ("sm_80", "device")
    assert built.target["device_name"] == "NVIDIA A100-SXM4-80GB"


def test_tile_options_set_the_default_contraction_tiles() -> None:
    sched = schedule(_model())
    request = Request(sched, CompileOptions(target="cuda", tile_m=128, tile_n=32))
    opts = CUDA_BACKEND.options(request)
    assert (opts.block_m, opts.block_n, opts.block_k) == (128, 32, 32)
    assert ROCM_BACKEND.options(Request(sched)).num_stages == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize(
    ("kind", "arch", "vendor"), [("cuda", "sm_90", "NVIDIA"), ("rocm", "gfx942", "AMD")]
)
def test_loading_without_the_gpu_is_incompatible(
    kind: str, arch: str, vendor: str, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    be = BACKENDS[kind]
    sched = schedule(_model())
    built = build(be, sched)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ArtifactIncompatible) as err:
        be.load(manifest(sched, built), built.members)
    message = str(err.value)
    assert message.startswith(f"built for {kind} {arch}; no {vendor} GPU found here")
    assert "TRITON_INTERPRET=1" in message and "\n" not in message


def test_loading_another_kinds_artifact_is_incompatible() -> None:
    sched = schedule(_model())
    built = build(CUDA_BACKEND, sched)
    with pytest.raises(ArtifactIncompatible, match="built for target 'cuda'"):
        ROCM_BACKEND.load(manifest(sched, built), built.members)


@pytest.mark.parametrize("kind", ["cuda", "rocm"])
def test_every_kernel_kind_runs_in_the_interpreter(kind: str) -> None:
    g = _model()
    sched = schedule(g)
    built = build(BACKENDS[kind], sched)
    exe = BACKENDS[kind].load(manifest(sched, built), built.members)
    assert [s.name for s in exe.inputs] == ["ids", "slots"]
    assert_matches(exe.run(_feeds()), interpreter.run(g, _feeds()))


def test_run_checks_its_inputs() -> None:
    sched = schedule(_model())
    built = build(CUDA_BACKEND, sched)
    exe = CUDA_BACKEND.load(manifest(sched, built), built.members)
    feeds = _feeds()
    with pytest.raises(UsageError, match="missing input 'slots'"):
        exe.run({"ids": feeds["ids"]})
    with pytest.raises(UsageError, match="has shape"):
        exe.run({**feeds, "ids": feeds["ids"][:3]})
    with pytest.raises(UsageError, match="has dtype"):
        exe.run({**feeds, "ids": feeds["ids"].astype(np.int32)})


def test_the_executable_times_seconds_per_run() -> None:
    sched = schedule(_model())
    built = build(CUDA_BACKEND, sched)
    exe = CUDA_BACKEND.load(manifest(sched, built), built.members)
    seconds = exe.time(_feeds(), 3)
    assert len(seconds) == 3 and all(0 < s < 60 for s in seconds)


def test_compiled_artifact_loads_and_runs_through_luminal_load(tmp_path: Path) -> None:
    g = _model()
    path = tmp_path / "model.lmnl"
    result = compile_model(LoadedModel(g, "test", "test"), path, CompileOptions(target="cuda"))
    assert result.target == "cuda"
    session = luminal.load(path)
    assert session.manifest.target["kind"] == "cuda"
    assert session.manifest.target["arch"] == "sm_90"
    assert result.check is not None and result.check.status.value == "passed"  # interpreted
    assert_matches(session.run(_feeds()), interpreter.run(g, _feeds()))


def _aot_supported() -> bool:
    from triton.compiler import ASTSource

    return "constexprs" in inspect.signature(ASTSource).parameters


@pytest.mark.skipif(not _aot_supported(), reason="this Triton's ASTSource differs")
def test_generated_kernels_compile_for_gpus_not_here(tmp_path: Path) -> None:
    """Triton's own compiler (to PTX and cubin, or to an AMD code object) accepts every
    kernel: what the interpreter cannot check, such as tl.dot tile shapes and types."""
    compiled = aot_in_subprocess(
        {"kinds": _model()}, [("cuda", "sm_90"), ("rocm", "gfx942")], tmp_path
    )
    assert compiled == {"kinds cuda sm_90": 6, "kinds rocm gfx942": 6}  # a scatter is 2 launches


def test_generated_module_snapshot() -> None:
    """The generated module for a small graph, pinned.  Regenerate with
    LUMINAL_UPDATE_SNAPSHOTS=1 after a deliberate change to the code generator."""
    text = CUDA_BACKEND.codegen(Request(schedule(_model())))["model.py"]
    path = SNAPSHOTS / "kinds_cuda.model.txt"
    if os.environ.get("LUMINAL_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()
