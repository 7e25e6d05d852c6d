"""The compile cache: a warm compile takes the rewritten graph and the built library from
it (and so extracts exactly the graph the tuning database knows); an entry that is
edited or was written under another install's secret is ignored, never loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import luminal
from luminal.compiler import cache
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.inputs import random_inputs
from luminal.compiler.ir import interpreter
from luminal.compiler.pipeline import CompileOptions, compile_model
from tests.compiler.search.search_graphs import mlp_block


def _compile(tmp: Path, name: str, budget: float = 5.0):  # type: ignore[no-untyped-def]
    graph = mlp_block(layers=3, width=40, batch=4)
    options = CompileOptions(budget_seconds=budget, tuning_db=str(tmp / "tune.db"))
    return graph, compile_model(LoadedModel(graph, "test", "test"), tmp / name, options)


def _entries(tmp: Path, kind: cache.Kind) -> list[Path]:
    return sorted((tmp / cache.DIRNAME / kind.value).glob("*"))


def test_a_warm_compile_reuses_the_rewrite_and_the_build(tmp_path: Path) -> None:
    graph, cold = _compile(tmp_path, "cold.lmnl")
    assert cold.rewrite is not None and not cold.rewrite.cached
    assert len(_entries(tmp_path, cache.Kind.REWRITE)) == 1
    assert len(_entries(tmp_path, cache.Kind.BUILD)) == 1
    _, warm = _compile(tmp_path, "warm.lmnl")
    assert warm.rewrite is not None and warm.rewrite.cached
    assert warm.rewrite.nodes_after == cold.rewrite.nodes_after
    assert warm.search is not None and warm.search.measured == 0
    # the same program, from the cache, runs correctly
    feeds = random_inputs(graph.input_specs(), seed=3)
    got = luminal.load(warm.path).run(feeds)
    np.testing.assert_allclose(got["y"], interpreter.run(graph, feeds)["y"], rtol=1e-4, atol=1e-5)
    assert warm.seconds["build"] < cold.seconds["build"]


@pytest.mark.parametrize("kind", [cache.Kind.REWRITE, cache.Kind.BUILD])
def test_an_edited_entry_is_ignored_and_replaced(tmp_path: Path, kind: cache.Kind) -> None:
    # budget 0: the rewrite and the tuning database, no measuring, so both compiles build
    # the same source (a search cut short by a loaded machine would go on measuring in the
    # second compile, build other variants under another key and leave the edited entry)
    graph, _ = _compile(tmp_path, "cold.lmnl", budget=0.0)
    (entry,) = _entries(tmp_path, kind)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    _, again = _compile(tmp_path, "again.lmnl", budget=0.0)
    assert again.rewrite is not None
    if kind is cache.Kind.REWRITE:
        assert not again.rewrite.cached  # recomputed
    assert entry.read_bytes() != bytes(data)  # replaced by a good entry
    feeds = random_inputs(graph.input_specs(), seed=3)
    got = luminal.load(again.path).run(feeds)
    np.testing.assert_allclose(got["y"], interpreter.run(graph, feeds)["y"], rtol=1e-4, atol=1e-5)


def test_an_entry_under_another_secret_is_not_trusted(tmp_path: Path) -> None:
    mine = cache.CompileCache(tmp_path, b"a" * 32)
    theirs = cache.CompileCache(tmp_path, b"b" * 32)
    theirs.put(cache.Kind.BUILD, "k", b"their library")
    assert mine.get(cache.Kind.BUILD, "k") is None
    assert theirs.get(cache.Kind.BUILD, "k") == b"their library"
    assert mine.get(cache.Kind.BUILD, "missing") is None


def test_a_graph_round_trips_exactly() -> None:
    graph = mlp_block(layers=2, width=16, batch=3)
    data = cache.dump_graph(graph, {"n": 1})
    assert data is not None
    loaded = cache.load_graph(data)
    assert loaded is not None
    back, note = loaded
    assert note == {"n": 1}
    assert back.nodes == graph.nodes and back.inputs == graph.inputs
    assert back.outputs == graph.outputs and dict(back.origins) == dict(graph.origins)
    assert all(np.array_equal(back.consts[k], v) for k, v in graph.consts.items())
    assert cache.graph_key(back) == cache.graph_key(graph)
    assert cache.load_graph(data[:-10]) is None  # truncated: not a graph


def test_no_cache_when_the_compile_must_not_reuse(tmp_path: Path) -> None:
    assert cache.open_cache(str(tmp_path / "t.db"), use=False) is None
