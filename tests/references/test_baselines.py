"""Baselines: built-ins, options, the entry-point registry, and torch on a .pt2."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

from luminal.errors import UsageError
from luminal.references import baselines
from luminal.references.baselines import BaselineOptions, Runner, open_baseline


def test_onnxruntime_uses_every_provider_present_and_the_thread_count(relu_onnx: Path) -> None:
    import onnxruntime as ort

    _, runner = open_baseline("onnxruntime", relu_onnx, BaselineOptions(threads=1))
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(runner({"in0": x})["out0"], np.maximum(x, 0))
    present = ort.get_available_providers()
    expected = [p for p in baselines.ORT_PROVIDERS if p in present]
    assert runner.info["providers"] == expected and runner.info["intra_op_num_threads"] == 1
    assert runner.info["graph_optimization"] == "default (all)"


def test_baseline_options_are_checked(relu_onnx: Path) -> None:
    opts = BaselineOptions(1, {"graph_optimization": "basic"})
    _, runner = open_baseline("onnxruntime", relu_onnx, opts)
    assert runner.info["graph_optimization"] == "basic"
    with pytest.raises(UsageError, match="unknown option"):
        open_baseline("onnxruntime", relu_onnx, BaselineOptions(1, {"fast": "yes"}))
    with pytest.raises(UsageError, match="choose from"):
        open_baseline("onnxruntime", relu_onnx, BaselineOptions(1, {"graph_optimization": "max"}))
    with pytest.raises(UsageError, match=r"runs \.pt2"):
        open_baseline("torch", relu_onnx, BaselineOptions(1))


class _Echo:
    name = "echo"
    formats = (".onnx",)

    def open(self, model: Path, options: BaselineOptions) -> Runner:
        return Runner(lambda feeds: dict(feeds), {"threads": options.threads})


def _entry_points(*eps: importlib.metadata.EntryPoint):  # type: ignore[no-untyped-def]
    def fake(group: str = "") -> tuple[importlib.metadata.EntryPoint, ...]:
        return eps if group == baselines.ENTRY_POINT_GROUP else ()

    return fake


def test_plugins_arrive_through_entry_points(monkeypatch, relu_onnx: Path) -> None:  # type: ignore[no-untyped-def]
    ep = importlib.metadata.EntryPoint("echo", f"{__name__}:_Echo", baselines.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", _entry_points(ep))
    assert list(baselines.registry()) == [*baselines.BUILTIN, "echo"]
    _, runner = open_baseline("echo", relu_onnx, BaselineOptions(3))
    assert runner.info == {"threads": 3} and runner({"a": 1})["a"] == 1  # type: ignore[dict-item]


def test_a_plugin_may_not_take_a_builtin_name(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    ep = importlib.metadata.EntryPoint("torch", "evil:Baseline", baselines.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", _entry_points(ep))
    with pytest.raises(UsageError, match="reuses the name 'torch'"):
        baselines.registry()


def test_a_broken_plugin_is_one_clear_error(monkeypatch, relu_onnx: Path) -> None:  # type: ignore[no-untyped-def]
    ep = importlib.metadata.EntryPoint("gone", "no_such_module:X", baselines.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", _entry_points(ep))
    with pytest.raises(UsageError, match="fails to load"):
        open_baseline("gone", relu_onnx, BaselineOptions(1))


@pytest.fixture(scope="module")
def tiny_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.lin(x))

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("pt2") / "tiny.pt2"
    torch.export.save(torch.export.export(Tiny().eval(), (torch.zeros(2, 4),)), path)
    return path


def test_torch_eager_runs_the_exported_program(tiny_pt2: Path) -> None:
    _, runner = open_baseline("torch", tiny_pt2, BaselineOptions(threads=1))
    out = runner({"x": np.ones((2, 4), np.float32)})
    assert list(out) == ["output0"] and out["output0"].shape == (2, 3)
    assert runner.info["mode"] == "eager" and runner.info["num_threads"] == 1


@pytest.mark.slow
def test_torch_compile_matches_eager(tiny_pt2: Path) -> None:
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)}
    _, eager = open_baseline("torch", tiny_pt2, BaselineOptions(1))
    _, compiled = open_baseline("torch-compile", tiny_pt2, BaselineOptions(1))
    np.testing.assert_allclose(compiled(feeds)["output0"], eager(feeds)["output0"], rtol=1e-5)
    assert compiled.info["backend"] == "inductor"


def test_tvm_baseline(relu_onnx: Path) -> None:
    pytest.importorskip("tvm", reason="apache-tvm is not installed (pip install apache-tvm)")
    _, runner = open_baseline("tvm", relu_onnx, BaselineOptions(1))
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(runner({"in0": x})["out0"], np.maximum(x, 0))
