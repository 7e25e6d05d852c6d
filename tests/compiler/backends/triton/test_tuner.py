"""Measured extraction for the GPU targets: the Triton tuner through the one pipeline,
in Triton's interpreter with a recorded timer standing in for CUDA events.

What is real here: the candidates (tl.dot tiles and the library GEMM), every candidate's
model generated, loaded and checked against the reference interpreter, the interleaved
rounds, the tuning database, and the chosen tiles in the written artifact.  Only the
seconds are recorded: the interpreter's wall clock says nothing about a GPU.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

import luminal
from luminal.compiler.artifact import read_artifact
from luminal.compiler.backends.target import Target
from luminal.compiler.backends.triton import CUDA_BACKEND
from luminal.compiler.backends.triton.runtime import TritonExecutable
from luminal.compiler.check import CheckStatus
from luminal.compiler.frontend.compose import contraction as C
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.hardware.device import Device
from luminal.compiler.ir import DType, GraphBuilder, interpreter
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.compiler.schedule.variant import Variant

H100 = Device("cuda", "NVIDIA", "NVIDIA H100 80GB HBM3", 80 << 30, "sm_90", source="nvml")
FASTEST = Variant(mr=32, nr=32, kc=32)  # what the recorded timer makes the winner


class RecordedTimer:
    """Seconds per run by candidate: FASTEST is quickest, the default slowest."""

    def __init__(self) -> None:
        self.timed: list[tuple[str, str]] = []

    def __call__(
        self, exe: TritonExecutable, feeds: object, kernel: str, variant: Variant, reps: int
    ) -> list[float]:
        assert isinstance(exe, TritonExecutable)
        self.timed.append((kernel, variant.label))
        if variant == FASTEST:
            seconds = 1e-4
        elif variant == Variant():
            seconds = 4e-4
        else:
            seconds = 2e-4
        return [seconds] * reps


def _graph():  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(7)
    b = GraphBuilder()
    x = b.input("x", (48, 64), DType.F32)
    w = b.const(rng.standard_normal((64, 80)).astype(np.float32))
    bias = b.const(rng.standard_normal(80).astype(np.float32))
    return b.build({"y": m.relu(b, C.gemm(b, x, w, bias))})


def _compile(tmp: Path, timer: RecordedTimer, name: str):  # type: ignore[no-untyped-def]
    graph = _graph()
    target = Target(replace(CUDA_BACKEND, timer=timer), H100)
    options = CompileOptions(
        target="cuda", budget_seconds=60.0, top_k=8, tuning_db=str(tmp / "tune.db"), rewrite=False
    )
    return graph, compile_model(
        LoadedModel(graph, "test", "test"), tmp / name, options, target=target
    )


def test_gpu_kernels_are_measured_and_the_fastest_correct_tile_is_written(tmp_path: Path) -> None:
    timer = RecordedTimer()
    graph, r = _compile(tmp_path, timer, "m.lmnl")
    assert r.search is not None and r.search.measured == 1
    (choice,) = [c for c in r.search.choices if c.kind == "contraction"]
    assert choice.source == "measured" and choice.variant == FASTEST
    assert choice.candidates >= 4 and choice.measured == choice.candidates  # top_k covers all
    labels = {label for _, label in timer.timed}
    assert {"generated", FASTEST.label, "blas"} <= labels  # default, a tile, the library GEMM
    assert r.check is not None and r.check.status is CheckStatus.PASSED

    art = read_artifact(r.path)
    (kernel,) = art.manifest.variants
    assert art.manifest.variants[kernel] == FASTEST
    text = art.members["model.py"].decode()
    ns: dict[str, object] = {}
    exec(text[text.index("LAUNCH = ") : text.index("EXTENTS = ")], ns)  # plain data
    launch = ns["LAUNCH"][kernel]  # type: ignore[index]
    assert (launch["BLOCK_M"], launch["BLOCK_N"], launch["BLOCK_K"]) == (32, 32, 32)

    feeds = {"x": np.random.default_rng(0).standard_normal((48, 64)).astype(np.float32)}
    got = luminal.load(r.path).run(feeds)["y"]
    np.testing.assert_allclose(got, interpreter.run(graph, feeds)["y"], rtol=1e-3, atol=1e-4)


def test_the_second_gpu_compile_takes_the_winner_from_the_tuning_database(tmp_path: Path) -> None:
    _compile(tmp_path, RecordedTimer(), "cold.lmnl")
    timer = RecordedTimer()
    _, warm = _compile(tmp_path, timer, "warm.lmnl")
    assert warm.search is not None and warm.search.measured == 0 and warm.search.cache_hits == 1
    assert timer.timed == []  # nothing timed again
    (kernel,) = read_artifact(warm.path).manifest.variants
    assert read_artifact(warm.path).manifest.variants[kernel] == FASTEST


def test_without_the_gpu_there_is_no_tuner_and_no_measuring(tmp_path: Path) -> None:
    timer = RecordedTimer()
    options = CompileOptions(target="cuda", budget_seconds=30.0, tuning_db=str(tmp_path / "t.db"))
    target = Target(replace(CUDA_BACKEND, timer=timer), None)
    r = compile_model(LoadedModel(_graph(), "t", "t"), tmp_path / "m.lmnl", options, target=target)
    assert r.search is None and timer.timed == []
    assert r.rewrite is not None  # the e-graph is backend-neutral: it still runs


def test_the_cost_model_prefers_tiles_that_fill_the_gpu() -> None:
    from luminal.compiler.backends.protocol import Request
    from luminal.compiler.schedule import schedule

    sched = schedule(_graph())
    tuner = CUDA_BACKEND.tuner(Request(sched, device=H100))
    assert tuner is not None and tuner.device_key.startswith("cuda-")
    (k,) = [k for k in sched.kernels if k.kind == "contraction"]
    cands = tuner.candidates(sched, k)
    assert cands[0] == Variant() and Variant(impl="blas") in cands
    assert len(set(cands)) == len(cands)
    assert Variant(mr=128, nr=128, kc=32) not in cands  # larger than the 48 x 80 output
    machine = tuner.calibrate()
    assert machine.peak_gflops > 1e4 and machine.cores == 132  # H100's nominal figures
    # 48 x 80 in 32 x 32 tiles: 6 programs; in 64 x 128: one, mostly padding.
    small = tuner.estimate(machine, sched, k, FASTEST)
    large = tuner.estimate(machine, sched, k, Variant(mr=64, nr=128, kc=32))
    assert 0 < small < large < 1e-3
