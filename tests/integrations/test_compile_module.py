"""The README's Python path: an nn.Module, `from_module`, `luminal.compile_model`, `load`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import luminal

torch = pytest.importorskip("torch")


def test_a_module_compiles_through_the_public_api(tmp_path: Path) -> None:
    from luminal.compiler.frontend.torch import from_module
    from luminal.compiler.options import CompileOptions

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    x = torch.randn(2, 4)
    out = tmp_path / "m.lmnl"
    luminal.compile_model(from_module(module, (x,)), out, CompileOptions(budget_seconds=None))
    session = luminal.load(out)
    (got,) = session.run({session.inputs[0].name: x.numpy()}).values()
    np.testing.assert_allclose(got, module(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert "compile_model" in luminal.__all__
