"""`compiler.profile` and the provenance behind it, on a 2-layer MLP built here: one row
per kernel of the schedule, each naming ONNX nodes of the model, shares summing to 1,
FLOPs and bytes as `work.cost` counts them; an artifact is profiled or refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from luminal.compiler.frontend.onnx import load
from luminal.compiler.ir import interpreter
from luminal.compiler.options import CompileOptions
from luminal.compiler.pipeline import compile_model
from luminal.compiler.profile import SCHEMA, profile_artifact, profile_model
from luminal.compiler.schedule import schedule
from luminal.compiler.schedule.provenance import kernel_origins
from luminal.compiler.schedule.work import cost
from luminal.compiler.search.saturate import rewrite
from luminal.errors import UsageError

NODES = ("fc1/MatMul", "fc1/Add", "act/Relu", "fc2/MatMul", "fc2/Add")


def mlp(path: Path) -> Path:
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
        for n, s in (("w1", (16, 32)), ("b1", (32,)), ("w2", (32, 8)), ("b2", (8,)))
    ]
    wires = [("MatMul", ["x", "w1"], "h"), ("Add", ["h", "b1"], "hb"), ("Relu", ["hb"], "r")]
    wires += [("MatMul", ["r", "w2"], "o"), ("Add", ["o", "b2"], "y")]
    nodes = [
        helper.make_node(op, ins, [out], name=name)
        for name, (op, ins, out) in zip(NODES, wires, strict=True)
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mlp(tmp_path_factory.mktemp("mlp") / "mlp.onnx")


def test_kernels_name_the_onnx_nodes_they_fuse(model: Path) -> None:
    sched = schedule(load(model).graph)
    named = {k.kind: kernel_origins(sched, k) for k in sched.kernels}
    assert [kernel_origins(sched, k) for k in sched.kernels] == [
        ("fc1/MatMul", "fc1/Add", "act/Relu"),
        ("fc2/MatMul", "fc2/Add"),
    ], named


def test_provenance_survives_the_rewrite(model: Path) -> None:
    graph = load(model).graph
    rewritten, report = rewrite(graph)
    assert report.fallback is None
    sched = schedule(rewritten)
    names = [kernel_origins(sched, k) for k in sched.kernels]
    assert all(names) and {n for row in names for n in row} == set(NODES)
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    (want,) = interpreter.run(graph, {"x": x}).values()
    (got,) = interpreter.run(rewritten, {"x": x}).values()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # names, not meaning, added


def test_profile_has_one_row_per_kernel_with_its_cost(model: Path) -> None:
    loaded = load(model)
    sched = schedule(loaded.graph)
    p = profile_model(loaded, CompileOptions(), seconds=0.05)
    assert [r.name for r in p.kernels] == [k.name for k in sched.kernels]
    for row, kernel in zip(p.kernels, sched.kernels, strict=True):
        c = cost(sched, kernel)
        assert (row.flops, row.bytes, row.kind) == (c.flops, c.bytes, kernel.kind)
        assert row.nodes and set(row.nodes) <= set(NODES)
        assert row.seconds > 0 and row.roof_gflops > 0
    assert sum(r.share for r in p.kernels) == pytest.approx(1.0)
    assert p.end_to_end_seconds > 0 and p.runs >= 3
    assert p.unaccounted_seconds == pytest.approx(p.end_to_end_seconds - p.kernel_seconds)
    doc = json.loads(json.dumps(p.to_json()))
    assert doc["schema"] == SCHEMA and len(doc["kernels"]) == len(sched.kernels)


def test_searched_compile_profiles_with_names(model: Path) -> None:
    p = profile_model(load(model), CompileOptions(budget_seconds=0), seconds=0.05, threads=1)
    assert p.threads == 1 and p.kernels
    assert all(r.nodes and set(r.nodes) <= set(NODES) for r in p.kernels)


def test_artifact_is_profiled_from_its_source(gemm_artifact) -> None:  # type: ignore[no-untyped-def]
    out, src, _ = gemm_artifact
    p = profile_artifact(out, {}, seconds=0.05)
    graph_nodes = {n.name or n.output[0] for n in onnx.load(src).graph.node}
    assert p.kernels and all(set(r.nodes) <= graph_nodes for r in p.kernels)
    assert any(r.nodes for r in p.kernels)


def test_artifact_without_its_source_says_what_to_pass(model: Path, tmp_path: Path) -> None:
    src = shutil.copy(model, tmp_path / "gone.onnx")
    out = tmp_path / "gone.lmnl"
    compile_model(load(src), out)
    Path(src).unlink()
    with pytest.raises(UsageError, match="profile the model file instead") as err:
        profile_artifact(out, {}, seconds=0.05)
    assert "\n" not in str(err.value)


def test_torch_kernels_name_their_fx_nodes() -> None:
    import torch

    from luminal.compiler.frontend.torch import from_module

    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    sched = schedule(from_module(m.eval(), (torch.randn(2, 8),)).graph)
    assert [kernel_origins(sched, k) for k in sched.kernels] == [("addmm", "relu"), ("addmm_1",)]


def test_an_artifact_is_rebuilt_with_its_compiles_rewrite(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuild takes the compile's rewrite (same limits, from the install's cache)
    rather than saturating again: saturation stops on a wall clock budget, so a second run
    (under the default limits, or on a loaded machine) can stop at another round and give
    other kernels than the artifact holds.  `luminal profile` on efficientnet_b0's
    artifact then failed in two tries of three."""
    from luminal.compiler.search import saturate

    out = tmp_path / "searched.lmnl"
    result = compile_model(load(model), out, CompileOptions(budget_seconds=0))
    assert result.rewrite is not None and result.rewrite.fallback is None

    def again(*args: object, **kwargs: object) -> None:
        raise AssertionError("the rebuild saturated again instead of reusing the compile's")

    monkeypatch.setattr(saturate, "rewrite", again)
    p = profile_artifact(out, {}, seconds=0.05)
    assert result.schedule is not None
    assert [r.name for r in p.kernels] == [k.name for k in result.schedule.kernels]


def _depthwise_onnx(path: Path) -> Path:
    """A 1x1 expansion + ReLU, then a padded 3x3 depthwise convolution + ReLU."""
    rng = np.random.default_rng(4)
    inits = [
        numpy_helper.from_array((rng.standard_normal(s) * 0.4).astype(np.float32), n)
        for n, s in (("w1", (16, 4, 1, 1)), ("w2", (16, 1, 3, 3)))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["e"], name="expand"),
        helper.make_node("Relu", ["e"], ["r"], name="relu1"),
        helper.make_node("Conv", ["r", "w2"], ["d"], name="dw", group=16, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["d"], ["y"], name="relu2"),
    ]
    graph = helper.make_graph(
        nodes,
        "dw",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 24, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 24, 24])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_artifact_whose_stencil_reads_the_pads_source_is_profiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the search chose a stencil that reads its pad's source (`Variant.unpad`), the
    artifact has no pad kernel, nor a variant for it (the search had chosen one), its
    output agrees with the reference (the compile's check), and the rebuild for `luminal
    profile` drops the same kernel."""
    import dataclasses

    from luminal.compiler import pipeline
    from luminal.compiler.backends.cpu import simd, stencil, toolchain
    from luminal.compiler.check import CheckStatus
    from luminal.compiler.hardware import detect_cpu
    from luminal.compiler.schedule.variant import Variant

    if not simd.isa_for(toolchain.feature_flags(detect_cpu())[1]).loadn:
        pytest.skip("no stencil on this machine")
    chosen: dict[str, str] = {}

    def tune(job: pipeline.Job) -> pipeline.Job:  # the search's choice, without timing
        assert job.sched is not None
        dw = [k for k in job.sched.kernels if k.fold is not None]
        assert len(dw) == 1 and dw[0].fold is not None
        chosen.update(dw=dw[0].name, pad=dw[0].fold.kernel)
        picks = {dw[0].name: Variant(impl=stencil.IMPL, unpad=True)}
        picks[dw[0].fold.kernel] = Variant(parallel=False)
        return pipeline.settle(dataclasses.replace(job, variants=picks))

    stages = tuple(
        pipeline.Stage(s.name, tune) if s.run is pipeline.tune else s for s in pipeline.STAGES
    )
    monkeypatch.setattr(pipeline, "STAGES", stages)
    src = _depthwise_onnx(tmp_path / "dw.onnx")
    out = tmp_path / "dw.lmnl"
    result = compile_model(load(src), out, CompileOptions(budget_seconds=0, rewrite=False))
    assert result.check is not None and result.check.status is CheckStatus.PASSED  # = reference
    assert result.schedule is not None
    names = [k.name for k in result.schedule.kernels]
    assert chosen["dw"] in names and chosen["pad"] not in names
    p = profile_artifact(out, {}, seconds=0.05)
    assert [r.name for r in p.kernels] == names
    assert any(r.variant == "stencil-unpad" and "dw" in r.nodes for r in p.kernels)


def test_the_profiled_and_the_plain_build_are_timed_in_alternating_blocks() -> None:
    """A slow spell of the machine falls on both builds alike: they alternate in blocks,
    each block long against a pool's spin, and each is timed over the whole span."""
    import itertools
    import time

    from luminal.compiler import profile as prof

    calls: list[str] = []
    state = {"slow": False}

    def runner(name: str, base: float):  # type: ignore[no-untyped-def]
        def run(feeds):  # type: ignore[no-untyped-def]
            calls.append(name)
            time.sleep(base * (3 if state["slow"] else 1))
            if len(calls) > 40:  # the machine gets busy half-way through
                state["slow"] = True

        return run

    reset = []
    (t_s, t_runs), (p_s, p_runs) = prof._time_both(
        runner("timed", 0.004), runner("plain", 0.002), {}, 0.6, lambda: reset.append(len(calls))
    )
    assert reset == [2 * prof.WARMUP_RUNS]  # the timers start after both warm up
    measured = calls[2 * prof.WARMUP_RUNS :]
    switches = sum(a != b for a, b in itertools.pairwise(measured))
    assert switches >= 3 and measured.count("timed") == t_runs and measured.count("plain") == p_runs
    assert t_runs >= prof.MIN_RUNS and p_runs >= prof.MIN_RUNS
    # both saw the busy spell: their ratio stays the 2:1 of their own work
    assert 1.5 < t_s / p_s < 2.7
