"""Every model of the public suite, compiled for cuda and for rocm without a GPU, runs
in Triton's interpreter and matches the reference interpreter.  (tl.dot in f32 uses
"ieee" precision, so the tolerance is f32 accumulation order, not TF32.)"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from benchmarks.models import SUITE_NAMES
from luminal.compiler.frontend import load_model
from luminal.compiler.ir import Graph, interpreter
from luminal.compiler.schedule import schedule
from tests.compiler.backends.triton.tritontest import (
    BACKENDS,
    aot_in_subprocess,
    assert_matches,
    build,
    manifest,
)

Case = tuple[Graph, dict[str, np.ndarray], dict[str, np.ndarray]]


@pytest.fixture(scope="module")
def suite_case(suite_onnx) -> Callable[[str], Case]:  # type: ignore[no-untyped-def]
    """name -> (graph, feeds, reference outputs), made once per model."""
    cache: dict[str, Case] = {}

    def get(name: str) -> Case:
        if name not in cache:
            path, feeds = suite_onnx(name)
            graph = load_model(path).graph
            cache[name] = (graph, feeds, interpreter.run(graph, feeds))
        return cache[name]

    return get


@pytest.mark.parametrize("kind", ["cuda", "rocm"])
@pytest.mark.parametrize("name", SUITE_NAMES)
def test_suite_model_matches_the_reference(name: str, kind: str, suite_case) -> None:  # type: ignore[no-untyped-def]
    graph, feeds, want = suite_case(name)
    be = BACKENDS[kind]
    sched = schedule(graph)
    built = build(be, sched)
    assert built.target["kind"] == kind
    exe = be.load(manifest(sched, built), built.members)
    start = time.perf_counter()
    got = exe.run(feeds)
    print(f"{name} {kind}: {time.perf_counter() - start:.2f} s in the interpreter")
    assert_matches(got, want)


@pytest.mark.parametrize("name", ["encoder", pytest.param("gpt", marks=pytest.mark.slow)])
def test_the_rewritten_suite_model_matches_too(name: str, suite_case) -> None:  # type: ignore[no-untyped-def]
    """`--budget` rewrites the graph before any backend sees it (fused Q/K/V, softmax
    normalised after P@V): the Triton program of the rewritten graph still matches the
    reference on the model as loaded."""
    from luminal.compiler.search.saturate import rewrite

    graph, feeds, want = suite_case(name)
    rewritten, report = rewrite(graph)
    assert report.fallback is None and report.nodes_after < report.nodes_before
    be = BACKENDS["cuda"]
    sched = schedule(rewritten)
    built = build(be, sched)
    assert_matches(be.load(manifest(sched, built), built.members).run(feeds), want)


@pytest.mark.slow
def test_suite_kernels_compile_for_gpus_not_here(suite_case, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every kernel of every suite model through Triton's real compiler, for sm_90 and
    gfx942 (about 10 s per model and target on 2 cores)."""
    graphs = {name: suite_case(name)[0] for name in SUITE_NAMES}
    compiled = aot_in_subprocess(graphs, [("cuda", "sm_90"), ("rocm", "gfx942")], tmp_path)
    for name, graph in graphs.items():
        launches = sum(2 if k.kind == "scatter" else 1 for k in schedule(graph).kernels)
        assert compiled[f"{name} cuda sm_90"] == compiled[f"{name} rocm gfx942"] == launches
