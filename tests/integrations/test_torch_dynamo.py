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


@pytest.fixture
def _one_graph_for_every_size():  # type: ignore[no-untyped-def]
    """Dynamo specializes sizes 0 and 1 into graphs of their own unless told not to."""
    import torch.fx.experimental._config as fx_config

    with fx_config.patch(backed_size_oblivious=True):
        yield


def _count_profiles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = torch_dynamo.compile_points

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch_dynamo, "compile_points", spy)
    return calls


class _Block(torch.nn.Module):
    """Linear, GELU, LayerNorm (whose eps Dynamo lifts to a tensor), attention over the
    sequence: every kind of op padding must get right."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(torch.nn.functional.gelu(self.proj(x)))
        p = torch.softmax(h @ h.transpose(1, 2), dim=-1)
        return (p @ h).mean(dim=1)


def test_dynamic_serves_every_batch_with_one_compile(
    monkeypatch: pytest.MonkeyPatch, _one_graph_for_every_size: None
) -> None:
    monkeypatch.setattr(torch_dynamo, "DYNAMIC_MAX", 4)  # 1..4: three buckets, a fast test
    profiles = _count_profiles(monkeypatch)
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    ).eval()
    fast = torch.compile(module, backend="luminal", dynamic=True)
    with torch.no_grad():
        for batch in (2, 1, 3, 4):
            x = torch.randn(batch, 8)
            torch.testing.assert_close(fast(x), module(x), rtol=1e-4, atol=1e-5)
    assert len(profiles) == 1


@pytest.mark.slow
def test_dynamic_serves_every_batch_and_sequence_with_one_compile(
    monkeypatch: pytest.MonkeyPatch, _one_graph_for_every_size: None
) -> None:
    monkeypatch.setattr(torch_dynamo, "DYNAMIC_MAX", 8)
    profiles = _count_profiles(monkeypatch)
    torch.manual_seed(0)
    module = _Block().eval()
    fast = torch.compile(module, backend="luminal", dynamic=True)
    with torch.no_grad():
        # (Dynamo's own matmul decomposition guards sequence != 1: a length-1 sequence is
        # a graph of Dynamo's making, not a recompile of luminal's profile.)
        for batch, seq in [(2, 4), (1, 2), (3, 7), (2, 8), (1, 5)]:
            x = torch.randn(batch, seq, 8)
            torch.testing.assert_close(fast(x), module(x), rtol=1e-4, atol=1e-5)
    assert len(profiles) == 1


@pytest.mark.slow
def test_dynamic_serves_batches_1_to_16_with_one_compile(
    monkeypatch: pytest.MonkeyPatch, _one_graph_for_every_size: None
) -> None:
    profiles = _count_profiles(monkeypatch)
    model = build("mlp")
    fast = torch.compile(model.module, backend="luminal", dynamic=True)
    (x,) = model.example_inputs
    with torch.no_grad():
        for batch in range(1, 17):
            xb = torch.randn(batch, *x.shape[1:])
            torch.testing.assert_close(fast(xb), model.module(xb), rtol=1e-4, atol=1e-5)
    assert len(profiles) == 1
