"""The torch baselines on the customer's own module (`net.py:FACTORY`) and on a .pt2."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from luminal.errors import UsageError
from luminal.references.baselines import BaselineOptions, open_baseline, split_module_ref

NET = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x, scale):
        return torch.relu(self.lin(x)) * scale, x.sum(dim=1)


def build():
    torch.manual_seed(0)
    return Net().eval()


def training():
    return Net()


def compiled():
    return torch.compile(build())


def not_a_module():
    return 42


def broken():
    raise RuntimeError("weights missing")
"""


@pytest.fixture(scope="module")
def net_py(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("torch-module") / "net.py"
    path.write_text(textwrap.dedent(NET))
    return path


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "scale": np.full((1,), 2.0, np.float32),  # given out of order: matched by name
        "x": rng.standard_normal((2, 4)).astype(np.float32),
    }


def test_model_references_split_only_a_python_file_and_an_identifier() -> None:
    assert split_module_ref("net.py:build") == (Path("net.py"), "build")
    assert split_module_ref("dir/net.py:build_2") == (Path("dir/net.py"), "build_2")
    assert split_module_ref("model.pt2") == (Path("model.pt2"), None)
    assert split_module_ref("c:/x/model.onnx") == (Path("c:/x/model.onnx"), None)


def test_the_customers_module_runs_eager_by_input_name(net_py: Path) -> None:
    import torch

    opts = BaselineOptions(1, {"factory": "build", "outputs": "y,total"})
    _, runner = open_baseline("torch", net_py, opts)
    feeds = _feeds()
    out = runner(feeds)
    torch.manual_seed(0)  # the hand-built oracle: the same seed gives the same weights
    lin = torch.nn.Linear(4, 3)
    x = torch.from_numpy(feeds["x"])
    np.testing.assert_allclose(out["y"], (torch.relu(lin(x)) * 2).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(out["total"], feeds["x"].sum(axis=1), rtol=1e-6)
    assert runner.info["module"] == "net.py:build() -> Net"
    assert runner.info["mode"] == "eager" and runner.info["inference_mode"] is True
    assert runner.info["num_threads"] == 1


def test_a_module_the_factory_compiled_is_timed_as_compiled(net_py: Path) -> None:
    _, runner = open_baseline("torch", net_py, BaselineOptions(1, {"factory": "compiled"}))
    assert runner.info["mode"] == "torch.compile"
    assert runner.info["compiled_by"] == "the factory (torch.compile)"
    _, again = open_baseline("torch-compile", net_py, BaselineOptions(1, {"factory": "compiled"}))
    assert "backend" not in again.info  # not compiled a second time


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (None, "name the callable that builds the model"),
        ("nothing", "no callable 'nothing'"),
        ("training", "training mode; return model.eval()"),
        ("not_a_module", "returned int, not a torch.nn.Module"),
        ("broken", r"broken\(\) failed: RuntimeError: weights missing"),
    ],
)
def test_a_bad_factory_is_one_clear_error(net_py: Path, factory: str | None, message: str) -> None:
    settings = {"factory": factory} if factory else {}
    with pytest.raises(UsageError, match=message):
        open_baseline("torch", net_py, BaselineOptions(1, settings))


def test_outputs_must_name_each_output(net_py: Path) -> None:
    _, runner = open_baseline(
        "torch", net_py, BaselineOptions(1, {"factory": "build", "outputs": "y"})
    )
    with pytest.raises(UsageError, match="names 1 outputs; the module returns 2"):
        runner(_feeds())


@pytest.fixture(scope="module")
def linear_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("pt2") / "linear.pt2"
    module = torch.nn.Linear(4, 3).eval()
    torch.export.save(torch.export.export(module, (torch.zeros(2, 4),)), path)
    return path


def test_a_pt2_checks_inputs_once_per_shape_and_still_refuses_a_wrong_one(linear_pt2: Path) -> None:
    _, runner = open_baseline("torch", linear_pt2, BaselineOptions(1))
    ok = {"input": np.ones((2, 4), np.float32)}
    first, second = runner(ok), runner(ok)
    np.testing.assert_array_equal(first["output0"], second["output0"])
    assert runner.info["module"] == "torch.export.ExportedProgram.module() of linear.pt2"
    assert runner.info["input_check"] == "torch's, on the first call of each input shape"
    with pytest.raises(Exception, match=r"shape|size|dim"):  # torch's own check: a new shape
        runner({"input": np.ones((5, 4), np.float32)})
    with pytest.raises(UsageError, match=r"factory= names a callable in a \.py file"):
        open_baseline("torch", linear_pt2, BaselineOptions(1, {"factory": "build"}))
