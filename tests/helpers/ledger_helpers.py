"""Ledgers for the metering tests: a clock the test moves, usage bodies, file surgery."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from luminal.metering.ledger import Ledger, RecordKind, Stamp

ARTIFACT = "sha256:" + "ab" * 32
SECOND = 10**9


@dataclass
class StepClock:
    """Wall and monotonic clocks that advance together by `step_s` a reading, one boot."""

    wall_ns: int = 1_793_491_200 * SECOND  # 2026-11-01T00:00:00Z
    mono_ns: int = 10**12
    boot: str = "boot-1"
    step_s: float = 60.0

    def __call__(self) -> Stamp:
        stamp = Stamp(self.wall_ns, self.mono_ns, self.boot)
        self.wall_ns += int(self.step_s * SECOND)
        self.mono_ns += int(self.step_s * SECOND)
        return stamp


def usage(
    calls: int = 10, busy_ns: int = 5 * SECOND, artifact: str = ARTIFACT, device: str = "cpu:x"
) -> dict[str, Any]:
    return {
        "artifact": artifact,
        "device": device,
        "calls": calls,
        "busy_ns": busy_ns,
        "window_ns": 60 * SECOND,
        "over_entitlement": False,
    }


def ledger_with(folder: Path, n: int, clock: StepClock | None = None) -> Ledger:
    ledger = Ledger(folder, clock=clock or StepClock(), durable=False)
    for k in range(n):
        ledger.append(RecordKind.USAGE, usage(calls=k + 1))
    return ledger


def lines(ledger: Ledger) -> list[bytes]:
    return ledger.path.read_bytes().splitlines(keepends=True)


def rewrite(ledger: Ledger, new_lines: list[bytes]) -> None:
    ledger.path.write_bytes(b"".join(new_lines))


def edit(line: bytes, **changes: Any) -> bytes:
    """The record on `line` with body fields changed (its hash left as it was)."""
    data = json.loads(line)
    data["body"].update(changes)
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode() + b"\n"
