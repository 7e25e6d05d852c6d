"""Several processes append at once; a writer killed mid-append (SIGKILL).

The writers are forked from the test process (real processes, each with its own file
descriptors and lock requests, but no interpreter start-up to wait for).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import Counter
from pathlib import Path

from luminal.metering.ledger import Ledger, RecordKind, verify
from tests.helpers.ledger_helpers import usage

_fork = multiprocessing.get_context("fork")


def _writer(folder: Path, me: str, n: int) -> None:
    ledger = Ledger(folder)  # durable: fdatasync and an atomic head per append
    for k in range(n):
        ledger.append(RecordKind.USAGE, usage(calls=k + 1, device=me))


class _Stalling(Ledger):
    """Appends like any writer, but stops half-way through its third record's bytes."""

    def __init__(self, folder: Path, stalled: Path) -> None:
        super().__init__(folder)
        self.stalled = stalled

    def _write_line(self, fd: int, line: bytes) -> None:
        if b'"calls":3' in line:
            os.write(fd, line[: len(line) // 2])
            self.stalled.touch()
            time.sleep(60)
        super()._write_line(fd, line)


def _stalling_writer(folder: Path, stalled: Path) -> None:
    ledger = _Stalling(folder, stalled)
    for k in range(5):
        ledger.append(RecordKind.USAGE, usage(calls=k + 1))


def test_four_processes_appending_500_records_each_lose_none(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    procs = [_fork.Process(target=_writer, args=(folder, f"writer-{w}", 500)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    verdict = verify(folder)
    assert verdict.ok and verdict.records == 2000 and verdict.pending_bytes == 0
    records = Ledger(folder).records()
    assert [r.seq for r in records] == list(range(2000))
    assert Counter(str(r.body["device"]) for r in records) == {f"writer-{w}": 500 for w in range(4)}
    for w in range(4):  # each writer's records in its own order: none lost, none reordered
        mine = [r.body["calls"] for r in records if r.body["device"] == f"writer-{w}"]
        assert mine == list(range(1, 501))
    writers = {str(r.body["device"]) for r in records[:100]}
    assert len(writers) > 1, "the writers never ran at the same time: not a concurrency test"


def test_a_writer_killed_mid_append_leaves_a_ledger_that_verifies_with_a_pending_tail(
    tmp_path: Path,
) -> None:
    folder, stalled = tmp_path / "ledger", tmp_path / "stalled"
    proc = _fork.Process(target=_stalling_writer, args=(folder, stalled))
    proc.start()
    deadline = time.monotonic() + 60
    while not stalled.exists():
        assert proc.is_alive() and time.monotonic() < deadline, "the writer never stalled"
        time.sleep(0.01)
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    verdict = verify(folder)
    assert verdict.ok, verdict.problem
    assert verdict.records == 2 and verdict.sealed == 2 and verdict.pending_bytes > 0
    # the lock died with the writer: the next one appends, and the cut-off bytes are gone
    assert Ledger(folder).append(RecordKind.USAGE, usage()).seq == 2
    after = verify(folder)
    assert after.ok and after.records == 3 and after.pending_bytes == 0
