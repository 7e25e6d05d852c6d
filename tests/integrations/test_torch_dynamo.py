"""torch.compile(model, backend="luminal") on the suite models, and its eager fallback."""

from __future__ import annotations

import logging

import pytest
import torch

from benchmarks.models import build
from luminal.integrations import torch_dynamo


@pytest.fixture(autouse=True)
def _fresh_dynamo():  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record how many graphs luminal compiled (rather than left to eager)."""
    compiled: list[int] = []
    real = torch_dynamo.compile_graph

    def spy(gm, example_inputs, options):  # type: ignore[no-untyped-def]
        fn = real(gm, example_inputs, options)
        compiled.append(len(example_inputs))
        return fn

    monkeypatch.setattr(torch_dynamo, "compile_graph", spy)
    return compiled


def test_backend_is_registered_by_entry_point() -> None:
    assert "luminal" in torch._dynamo.list_backends(exclude_tags=())


@pytest.mark.parametrize("name", ["mlp", "encoder"])
def test_suite_model_matches_eager(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _spy(monkeypatch)
    model = build(name)
    fast = torch.compile(model.module, backend="luminal")
    with torch.no_grad():
        want = model.module(*model.example_inputs)
        got = fast(*model.example_inputs)
        again = fast(*model.example_inputs)  # the cached program, no recompilation
    assert compiled, "luminal compiled no graph"
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(again, want, rtol=1e-4, atol=1e-5)


class _Sorts(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sort(x, dim=-1).values * 2 + 1


def test_unsupported_graph_falls_back_to_eager_with_a_logged_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    module = _Sorts()
    fast = torch.compile(module, backend="luminal")
    x = torch.randn(3, 5)
    with caplog.at_level(logging.WARNING, logger=torch_dynamo.log.name):
        got = fast(x)
    torch.testing.assert_close(got, module(x))
    messages = [r.getMessage() for r in caplog.records if r.name == torch_dynamo.log.name]
    assert any("running it eagerly" in m and "aten.sort" in m for m in messages), messages


def test_graph_needing_autograd_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    layer = torch.nn.Linear(4, 2)
    fast = torch.compile(layer, backend="luminal")
    x = torch.randn(3, 4)
    with caplog.at_level(logging.WARNING, logger=torch_dynamo.log.name):
        y = fast(x)
    y.sum().backward()  # eager autograd still works
    assert layer.weight.grad is not None
    assert any("autograd" in r.getMessage() for r in caplog.records)
