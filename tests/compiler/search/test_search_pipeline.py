"""`compile_model` with a search budget: measured choices, the tuning cache on the
second compile, and an interrupted search that still writes a correct artifact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import luminal
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.inputs import random_inputs
from luminal.compiler.ir import interpreter
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.compiler.search.tunedb import TuningDB
from tests.compiler.search.search_graphs import mlp_block


def _compile(tmp: Path, budget: float | None, name: str = "m.lmnl", **kw: object):  # type: ignore[no-untyped-def]
    graph = mlp_block(layers=4, width=64, batch=6)
    options = CompileOptions(budget_seconds=budget, tuning_db=str(tmp / "tune.db"), **kw)  # type: ignore[arg-type]
    return graph, compile_model(LoadedModel(graph, "test", "test"), tmp / name, options)


def _check(graph, path: Path) -> None:  # type: ignore[no-untyped-def]
    feeds = random_inputs(graph.input_specs(), seed=3)
    got = luminal.load(path).run(feeds)
    want = interpreter.run(graph, feeds)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-5)


def test_search_measures_then_the_second_compile_hits_the_cache(tmp_path: Path) -> None:
    graph, cold = _compile(tmp_path, 30.0)
    assert cold.search is not None
    assert cold.search.measured >= 1
    _check(graph, cold.path)
    with TuningDB(tmp_path / "tune.db") as db:
        rows = db.measurements()
    assert len(rows) >= 2 and all(r.seconds > 0 for r in rows)
    measured = cold.search.measured

    _, warm = _compile(tmp_path, 30.0, "warm.lmnl")
    assert warm.search is not None
    assert warm.search.measured == 0
    assert warm.search.cache_hits == measured
    assert warm.seconds["tune kernels"] < cold.seconds["tune kernels"]
    # the close calls the model runs decided are decided alike from the database
    assert {c.hash: c.variant for c in warm.search.choices} == {
        c.hash: c.variant for c in cold.search.choices
    }
    assert warm.search.in_model == cold.search.in_model
    _check(graph, warm.path)


def test_without_model_runs_the_benchs_winners_stand(tmp_path: Path) -> None:
    graph, r = _compile(tmp_path, 10.0, model_runs=False)
    assert r.search is not None and r.search.measured >= 1
    assert r.search.in_model == 0
    assert all(not c.in_model for c in r.search.choices)
    with TuningDB(tmp_path / "tune.db") as db:
        assert not [m for m in db.measurements() if m.device.endswith("/in-model")]
    _check(graph, r.path)


def test_budget_zero_rewrites_and_only_reads_the_database(tmp_path: Path) -> None:
    graph, r = _compile(tmp_path, 0.0)
    assert r.search is not None and r.search.measured == 0
    assert r.rewrite is not None
    _check(graph, r.path)


def test_no_budget_means_no_search(tmp_path: Path) -> None:
    _, r = _compile(tmp_path, None)
    assert r.search is None and r.rewrite is None
    assert not (tmp_path / "tune.db").exists()


def test_ctrl_c_during_the_search_keeps_what_was_measured(tmp_path: Path) -> None:
    graph = mlp_block(layers=4, width=64, batch=6)
    calls: list[str] = []

    def progress(what: str, n: int, total: int) -> None:
        calls.append(what)
        if what.startswith("measuring") and n >= 1:
            raise KeyboardInterrupt  # the user's Ctrl-C, while the second kernel starts

    options = CompileOptions(budget_seconds=60.0, tuning_db=str(tmp_path / "tune.db"))
    r = compile_model(
        LoadedModel(graph, "test", "test"), tmp_path / "m.lmnl", options, on_progress=progress
    )
    assert r.interrupted
    assert r.search is not None and r.search.interrupted
    assert r.search.measured == 1  # the first kernel finished and was kept
    assert r.path.exists()
    _check(graph, r.path)
    with TuningDB(tmp_path / "tune.db") as db:
        assert len({m.kernel for m in db.measurements()}) == 1


@pytest.mark.parametrize(
    "text, seconds", [("120s", 120.0), ("2m", 120.0), ("90", 90.0), ("0", 0.0), ("off", None)]
)
def test_parse_budget(text: str, seconds: float | None) -> None:
    from luminal.cli.options import parse_budget

    assert parse_budget(text) == seconds


def test_a_wrong_rewrite_is_caught_and_the_unsearched_compile_shipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from luminal.compiler.check import CheckStatus
    from luminal.compiler.search import saturate

    graph = mlp_block(layers=4, width=64, batch=6)
    impostor = mlp_block(layers=4, width=64, batch=6, seed=99)  # same interface, other values
    _, report = saturate.rewrite(graph)
    monkeypatch.setattr(saturate, "rewrite", lambda g, budget: (impostor, report))
    options = CompileOptions(budget_seconds=5.0, tuning_db=str(tmp_path / "tune.db"))
    r = compile_model(LoadedModel(graph, "test", "test"), tmp_path / "m.lmnl", options)
    assert r.check is not None and r.check.status is CheckStatus.FELL_BACK
    assert "differs from the reference" in r.check.detail
    _check(graph, r.path)


def test_an_unusable_default_database_does_not_stop_the_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LUMINAL_TUNING_DB", str(blocker / "tuning.db"))  # cannot be created
    graph = mlp_block(layers=2, width=32, batch=4)
    r = compile_model(
        LoadedModel(graph, "test", "test"), tmp_path / "m.lmnl", CompileOptions(budget_seconds=10.0)
    )
    assert r.search is not None and r.search.measured >= 1
    _check(graph, r.path)


def test_an_unusable_named_database_is_a_usage_error(tmp_path: Path) -> None:
    from luminal.errors import UsageError

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    graph = mlp_block(layers=2, width=32, batch=4)
    options = CompileOptions(budget_seconds=10.0, tuning_db=str(blocker / "tuning.db"))
    with pytest.raises(UsageError, match="tuning database"):
        compile_model(LoadedModel(graph, "test", "test"), tmp_path / "m.lmnl", options)
    assert not (tmp_path / "m.lmnl").exists()
