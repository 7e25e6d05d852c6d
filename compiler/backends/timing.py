"""Timing a loaded model: the one measurement loop every backend's `time` can share."""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from luminal.compiler.backends.protocol import Executable


def measure(
    exe: Executable, feeds: Mapping[str, np.ndarray], repeats: int, warmup: int = 1
) -> list[float]:
    """Wall seconds of each of `repeats` runs, after `warmup` untimed ones (first-run
    costs such as page faults in the arena are not the model's speed)."""
    for _ in range(warmup):
        exe.run(feeds)
    out = []
    for _ in range(max(repeats, 0)):
        start = time.perf_counter()
        exe.run(feeds)
        out.append(time.perf_counter() - start)
    return out
