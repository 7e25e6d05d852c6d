"""Arbitrage: the planner's choice from measured timings, and a split run whose KV cache
crosses between two pinned worker processes with the tokens unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.llm_models import build
from luminal.compiler.llm.decoder import compile_decoder, load_decoder
from luminal.compiler.llm.placement import (
    Device,
    DeviceTiming,
    Objective,
    Transfer,
    arbitrage,
    plan,
)
from luminal.compiler.llm.sampling import Sampling
from luminal.errors import UsageError

FAST_PREFILL = DeviceTiming("a", prefill_s=0.010, step_s=0.004)
FAST_DECODE = DeviceTiming("b", prefill_s=0.050, step_s=0.001)


def test_the_plan_splits_when_the_saving_beats_the_transfer() -> None:
    cheap = plan([FAST_PREFILL, FAST_DECODE], Transfer(1 << 20, 0.002), new_tokens=33)
    assert (cheap.prefill, cheap.decode) == ("a", "b")
    assert cheap.predicted_s == pytest.approx(0.010 + 32 * 0.001 + 0.002)
    assert "moving the cache costs 2.00 ms" in cheap.reason
    assert len(cheap.candidates) == 4
    assert (cheap.candidates[0].prefill, cheap.candidates[0].decode) == ("a", "b")
    dear = plan([FAST_PREFILL, FAST_DECODE], Transfer(1 << 20, 0.5), new_tokens=33)
    assert (dear.prefill, dear.decode) == ("b", "b")  # 0.050 + 0.032 < 0.010 + 0.128
    assert "a split would pay 500.00 ms" in dear.reason


# Two CPU sets as this machine measures them (stop 25, GPT-2 base): prefill scales with the
# second core, a decode step (bound by memory) hardly does.
WIDE = DeviceTiming("cpu:0,1", prefill_s=0.0314, step_s=0.00645)
NARROW = DeviceTiming("cpu:1", prefill_s=0.0417, step_s=0.00709)
PRICES = {"cpu:0,1": 2.0, "cpu:1": 1.0}
MOVE = Transfer(1_470_000, 0.0058)


def test_latency_keeps_both_phases_on_the_fastest_device() -> None:
    got = plan([WIDE, NARROW], MOVE, new_tokens=64, prices=PRICES)
    assert (got.prefill, got.decode) == ("cpu:0,1", "cpu:0,1")
    assert got.objective is Objective.LATENCY


def test_cost_moves_decode_to_the_cheaper_device_within_the_slack() -> None:
    got = plan([WIDE, NARROW], MOVE, 64, Objective.COST, slack=1.2, prices=PRICES)
    # prefill on cpu:1 is 1.33x the fastest: refused; decode there is 1.10x, at half price
    assert (got.prefill, got.decode) == ("cpu:0,1", "cpu:1")
    want_cost = 2 * 0.0314 + 63 * 0.00709 + 3 * 0.0058
    assert got.candidates[0].cost == pytest.approx(want_cost)
    assert got.predicted_s == pytest.approx(0.0314 + 63 * 0.00709 + 0.0058)
    assert "cpu:1 41.700 ms, 1.33x the fastest, over the 1.20x slack" in got.reason
    assert "moving the cache costs 5.80 ms" in got.reason
    assert "against 0.8755 on cpu:0,1 alone (40% less)" in got.reason  # 2 x (31.4 + 63 x 6.45) ms
    assert [c.admissible for c in got.candidates].count(True) == 2  # wide alone, the split
    # a looser slack admits prefill on the single core too: cheapest everywhere
    loose = plan([WIDE, NARROW], MOVE, 64, Objective.COST, slack=1.5, prices=PRICES)
    assert (loose.prefill, loose.decode) == ("cpu:1", "cpu:1")
    # a tighter one refuses the narrow decode: no split
    tight = plan([WIDE, NARROW], MOVE, 64, Objective.COST, slack=1.05, prices=PRICES)
    assert (tight.prefill, tight.decode) == ("cpu:0,1", "cpu:0,1")
    assert "every split costs more or misses the slack" in tight.reason


def test_cost_counts_the_transfer_in_the_decode_phase() -> None:
    # decode on cpu:1 alone is within the slack, but not with a slow move added to it
    slow_move = Transfer(1 << 20, 0.2)
    got = plan([WIDE, NARROW], slow_move, 64, Objective.COST, slack=1.2, prices=PRICES)
    assert (got.prefill, got.decode) == ("cpu:0,1", "cpu:0,1")
    # and when no pair is within the slack the fastest pair runs
    fast_p = DeviceTiming("a", prefill_s=0.010, step_s=0.010)
    fast_d = DeviceTiming("b", prefill_s=0.100, step_s=0.001)
    none = plan([fast_p, fast_d], Transfer(1, 0.5), 11, Objective.COST, slack=1.1)
    assert not none.candidates[0].admissible
    assert (none.prefill, none.decode) == ("a", "a")  # 0.110 s, the least end to end
    assert "no pair keeps both phases within the slack" in none.reason
    with pytest.raises(UsageError, match=r"slack 0\.5: expected 1 or more"):
        plan([fast_p], Transfer(1, 0.0), 4, Objective.COST, slack=0.5)


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
        assert got.ran_s >= got.generation.e2e_s and got.cost > 0
        # unforced, for cost: whatever the measurements say, the pair run is the plan's
        # over those measurements, and the tokens are the same
        cost = arbitrage(artifact, devices, prompts, 24, sampling, objective=Objective.COST)
        assert cost.generation.tokens == want.tokens
        again = plan(
            cost.timings,
            cost.transfer,
            24,
            Objective.COST,
            prices={d.name: float(len(d.cpus)) for d in devices},
        )
        assert (cost.placement.prefill, cost.placement.decode) == (again.prefill, again.decode)
        split_run = cost.placement.prefill != cost.placement.decode
        assert cost.moved_bytes == (cost.transfer.bytes if split_run else 0)
    with pytest.raises(UsageError, match="the same CPU set is named twice"):
        arbitrage(artifact, [devices[0], devices[0]], prompts, 4, sampling)
