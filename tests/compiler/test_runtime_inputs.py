"""`Session.run` takes ready arrays on a fast path and everything else through the full
checks: both give the same answers, and mistakes are still one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import luminal
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.ir import interpreter
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.errors import UsageError
from tests.compiler.search.search_graphs import mlp_block


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    graph = mlp_block(layers=2, width=16, batch=3)
    path = Path(tmp_path_factory.mktemp("rt")) / "m.lmnl"
    compile_model(LoadedModel(graph, "test", "test"), path, CompileOptions())
    return graph, luminal.load(path)


def test_fast_and_checked_paths_agree(session) -> None:  # type: ignore[no-untyped-def]
    graph, s = session
    x = np.random.default_rng(0).standard_normal((16, 3)).astype(np.float32).T  # not contiguous
    want = interpreter.run(graph, {"x": np.ascontiguousarray(x)})["y"]
    np.testing.assert_allclose(s.run({"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        s.run({"x": np.ascontiguousarray(x)})["y"], want, rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    "feeds, message",
    [
        ({"x": np.zeros((3, 16), np.float64)}, "dtype float64"),
        ({"x": np.zeros((3, 15), np.float32)}, "has shape"),
        ({"x": np.zeros((3, 16), np.float32), "z": np.zeros(1)}, "unknown input"),
        ({}, "missing input 'x'"),
    ],
)
def test_mistakes_are_one_line(session, feeds, message) -> None:  # type: ignore[no-untyped-def]
    _, s = session
    with pytest.raises(UsageError, match=message):
        s.run(feeds)
