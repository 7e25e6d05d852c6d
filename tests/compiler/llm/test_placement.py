"""Arbitrage: the planner's choice from measured timings, and a split run whose KV cache
crosses between two pinned worker processes with the tokens unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.llm_models import build
from luminal.compiler.llm.decoder import compile_decoder, load_decoder
from luminal.compiler.llm.placement import Device, DeviceTiming, Transfer, arbitrage, plan
from luminal.compiler.llm.sampling import Sampling
from luminal.errors import UsageError

FAST_PREFILL = DeviceTiming("a", prefill_s=0.010, step_s=0.004)
FAST_DECODE = DeviceTiming("b", prefill_s=0.050, step_s=0.001)


def test_the_plan_splits_when_the_saving_beats_the_transfer() -> None:
    cheap = plan([FAST_PREFILL, FAST_DECODE], Transfer(1 << 20, 0.002), new_tokens=33)
    assert (cheap.prefill, cheap.decode) == ("a", "b")
    assert cheap.predicted_s == pytest.approx(0.010 + 32 * 0.001 + 0.002)
    assert "moving the cache costs 2.00 ms" in cheap.reason
    assert len(cheap.candidates) == 4 and cheap.candidates[0][:2] == ("a", "b")
    dear = plan([FAST_PREFILL, FAST_DECODE], Transfer(1 << 20, 0.5), new_tokens=33)
    assert (dear.prefill, dear.decode) == ("b", "b")  # 0.050 + 0.032 < 0.010 + 0.128
    assert "a split would pay 500.00 ms" in dear.reason


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("arb") / "gpt2.lmnl"
    compile_decoder(build("gpt2"), path, batch=2, prompt_lengths=(16,), capacities=(64,))
    return path


def test_a_split_moves_the_cache_and_keeps_the_tokens(artifact: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    devices = [Device((cpus[0],)), Device(tuple(cpus))] if len(cpus) > 1 else [Device((cpus[0],))]
    prompts = [[3, 1, 4, 1, 5, 9, 2, 6], [5, 3, 5]]
    sampling = Sampling(temperature=0.9, top_k=20, seed=4)  # the sampler's state moves too
    want = load_decoder(artifact, meter=None).generate(prompts, 24, sampling)
    names = [d.name for d in devices]
    split = (names[-1], names[0])
    got = arbitrage(
        artifact, devices, prompts, 24, sampling, force=split if len(names) > 1 else None
    )
    assert got.generation.tokens == want.tokens
    assert [t.device for t in got.timings] == names
    assert all(t.prefill_s > 0 and t.step_s > 0 for t in got.timings)
    if len(names) > 1:
        assert (got.placement.prefill, got.placement.decode) == split
        assert got.moved_bytes == got.transfer.bytes > 0
        assert got.placement.reason.startswith("forced; the plan was")
    with pytest.raises(UsageError, match="the same CPU set is named twice"):
        arbitrage(artifact, [devices[0], devices[0]], prompts, 4, sampling)
