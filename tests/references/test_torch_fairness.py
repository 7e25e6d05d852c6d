"""Issue #13's inflated-baseline check: the torch baseline times what the customer runs.

The same module, inputs and thread count are timed three ways, interleaved round by round
so the shared machine's drift hits all alike: the customer's nn.Module called by hand under
`torch.inference_mode()`, the `torch` baseline on that module (`net.py:FACTORY`), and the
`torch` baseline on the module's .pt2 ExportedProgram.  Each round's baseline block is
divided by the same round's hand-timed block of the same program (the nn.Module; for the
.pt2 arm, the exported program's own forward) (a shared machine's load swings 2x between
runs, far less within one round), and the median of those ratios must be within 10% of 1.  The model (a 3-layer 512-wide MLP at batch 32, about
1 ms a call at one thread) is dominated by compute, so a fixed per-call overhead such as
torch's per-call input check on `.module()` (about 130 µs) shows and noise does not.
"""

from __future__ import annotations

import statistics
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from luminal.references.baselines import BaselineOptions, open_baseline

NET = """
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512)
    ).eval()
"""
ROUNDS, CALLS = 40, 4


def _block(fn: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter_ns() - start) / CALLS


def test_torch_baseline_is_within_10_percent_of_the_hand_timed_module(tmp_path: Path) -> None:
    import torch

    net = tmp_path / "net.py"
    net.write_text(textwrap.dedent(NET))
    namespace: dict[str, object] = {}
    exec(compile(net.read_text(), str(net), "exec"), namespace)
    module = namespace["build"]()  # type: ignore[operator]
    x = np.random.default_rng(0).standard_normal((32, 512)).astype(np.float32)
    pt2 = tmp_path / "net.pt2"
    torch.export.save(torch.export.export(module, (torch.from_numpy(x),)), pt2)

    _, from_py = open_baseline("torch", net, BaselineOptions(1, {"factory": "build"}))
    _, from_pt2 = open_baseline("torch", pt2, BaselineOptions(1))
    assert torch.get_num_threads() == 1
    tx = torch.from_numpy(x)

    program = torch.export.load(pt2).module()

    def by_hand() -> object:
        with torch.inference_mode():
            return module(tx)

    def program_by_hand() -> object:  # the .pt2's own graph, as a deployment calls it
        with torch.inference_mode():
            return program.forward(tx)

    arms: dict[str, Callable[[], object]] = {
        "hand": by_hand,
        "program": program_by_hand,
        "module": lambda: from_py({"input": x}),
        "pt2": lambda: from_pt2({"input": x}),
    }
    np.testing.assert_allclose(arms["module"]()["output0"], by_hand().numpy(), rtol=1e-6)  # type: ignore[index, attr-defined]
    np.testing.assert_allclose(arms["pt2"]()["output0"], by_hand().numpy(), rtol=1e-6)  # type: ignore[index, attr-defined]
    # Up to three independent measurements, the first within 10% passing: a burst of load
    # on the shared machine can push one past the bound; the defect this guards against
    # (the .pt2 baseline timed 3.3x slow) fails all three.
    attempts = []
    for _ in range(3):
        median = _paired_medians(arms)
        attempts.append(", ".join(f"{k} {v:.3f}x" for k, v in median.items()))
        if 0.90 < min(median.values()) and max(median.values()) < 1.10:
            return
    pytest.fail(f"baseline not within 10% of the hand-timed nn.Module: {'; '.join(attempts)}")


def _paired_medians(arms: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Each baseline arm's median over rounds of its block time / the same round's
    hand-timed block of what it runs (paired within the round: drift cancels)."""
    # the module arm against the nn.Module; the .pt2 arm against the exported program's
    # own forward (its ATen graph measured 1.06x the nn.Module by itself: not the
    # baseline's doing, while the per-call check the baseline removes was 3.3x)
    ratios: dict[str, list[float]] = {"module": [], "pt2": []}
    reference = {"module": "hand", "pt2": "program"}
    order = list(arms)
    for r in range(ROUNDS):
        block = {}
        k = r % len(order)
        for name in order[k:] + order[:k]:  # rotate who goes first
            block[name] = _block(arms[name])
        for name, got in ratios.items():
            got.append(block[name] / block[reference[name]])
    return {k: statistics.median(v) for k, v in ratios.items()}


@pytest.mark.parametrize("threads", [1])
def test_the_overhead_it_removes_is_real(tmp_path: Path, threads: int) -> None:
    """The check this baseline does once costs time on every call when left on: the cause
    the fix names is the cause (the shape of ExportedProgram.module() torch hands back)."""
    import torch

    torch.set_num_threads(threads)
    module = torch.nn.Linear(8, 8).eval()
    x = torch.zeros(1, 8)
    gm = torch.export.export(module, (x,)).module()
    assert gm.validate_inputs is True  # torch's default: checked on every call

    def timed(validate: bool) -> float:
        gm.validate_inputs = validate
        with torch.inference_mode():
            return _block(lambda: gm(x))

    def paired() -> float:
        """The median over rounds of on / off, both timed in the same round (who goes
        first alternates): load on the shared machine lands on both arms of a round.
        Timed as two separate medians, a loaded CI run measured 47.8 against 38.5 us."""
        ratios = []
        for r in range(15):
            first, second = (True, False) if r % 2 == 0 else (False, True)
            times = {first: timed(first), second: timed(second)}
            ratios.append(times[True] / times[False])
        return statistics.median(ratios)

    timed(True), timed(False)  # warm-up
    # up to three independent measurements: the check costs about 3x when the machine is
    # quiet, so one of them clears 1.5x unless the cause is gone
    seen = []
    for _ in range(3):
        seen.append(paired())
        if seen[-1] > 1.5:
            break
    assert max(seen) > 1.5, f"input check on / off per call: {', '.join(f'{r:.2f}x' for r in seen)}"
