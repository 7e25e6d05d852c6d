"""`verify` names each kind of tampering, at the record where it happened, and tells an
append cut short by a crash (pending) from a truncation (tampering)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from luminal.metering.ledger import Finding, Ledger, RecordKind, verify
from luminal.metering.ledger.records import leaf_hash
from tests.helpers.ledger_helpers import SECOND, StepClock, edit, ledger_with, lines, rewrite, usage


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return ledger_with(tmp_path / "ledger", 10)


def test_an_honest_ledger_verifies(ledger: Ledger) -> None:
    verdict = verify(ledger.folder)
    assert verdict.ok and verdict.records == 10 and verdict.sealed == 10
    assert verdict.pending_bytes == 0
    assert [r.seq for r in ledger.records()] == list(range(10))


def _problem(ledger: Ledger) -> tuple[Finding, int, str]:
    verdict = verify(ledger.folder)
    assert verdict.problem is not None, "tampering went unnoticed"
    return verdict.problem.finding, verdict.problem.seq, verdict.problem.message


def test_an_edited_record(ledger: Ledger) -> None:
    ls = lines(ledger)
    ls[4] = edit(ls[4], calls=1)  # fewer calls billed
    rewrite(ledger, ls)
    assert _problem(ledger) == (
        Finding.EDITED,
        4,
        "record 4: its hash does not match its contents (edited)",
    )
    assert verify(ledger.folder).records == 4  # the four before it still verify


def test_an_edited_record_re_hashed_breaks_the_next_link(ledger: Ledger) -> None:
    ls = lines(ledger)
    data = json.loads(edit(ls[4], calls=1))
    data["hash"] = leaf_hash({k: v for k, v in data.items() if k != "hash"})
    ls[4] = json.dumps(data).encode() + b"\n"
    rewrite(ledger, ls)
    finding, seq, message = _problem(ledger)
    assert (finding, seq) == (Finding.BROKEN_LINK, 5)
    assert "link to record 4 is broken" in message


def test_the_last_record_edited_and_re_hashed_differs_from_the_head(ledger: Ledger) -> None:
    ls = lines(ledger)
    data = json.loads(edit(ls[9], calls=1))
    data["hash"] = leaf_hash({k: v for k, v in data.items() if k != "hash"})
    ls[9] = json.dumps(data).encode() + b"\n"
    rewrite(ledger, ls)
    assert _problem(ledger)[:2] == (Finding.EDITED, 9)


def test_a_deleted_record(ledger: Ledger) -> None:
    ls = lines(ledger)
    del ls[6]
    rewrite(ledger, ls)
    assert _problem(ledger) == (
        Finding.MISSING,
        6,
        "record 6 is missing: record 5 is followed by record 7",
    )


def test_two_swapped_records(ledger: Ledger) -> None:
    ls = lines(ledger)
    ls[3], ls[4] = ls[4], ls[3]
    rewrite(ledger, ls)
    assert _problem(ledger) == (
        Finding.REORDERED,
        3,
        "record 3: found record 4 in its place (records out of order)",
    )


@pytest.mark.parametrize("keep", [7, 0])
def test_a_truncated_file(ledger: Ledger, keep: int) -> None:
    data = ledger.path.read_bytes()
    cut = sum(len(x) for x in lines(ledger)[:keep])
    ledger.path.write_bytes(data[:cut])
    finding, seq, message = _problem(ledger)
    assert (finding, seq) == (Finding.TRUNCATED, keep)
    assert f"the head seals 10 records, the file holds {keep}" in message


def test_a_file_cut_inside_a_sealed_record_is_truncation_not_pending(ledger: Ledger) -> None:
    data = ledger.path.read_bytes()
    cut = sum(len(x) for x in lines(ledger)[:8]) + 30
    ledger.path.write_bytes(data[:cut])
    finding, seq, message = _problem(ledger)
    assert (finding, seq) == (Finding.TRUNCATED, 8) and "a partial record follows" in message


def test_an_append_cut_short_is_pending_and_the_next_append_repairs_it(ledger: Ledger) -> None:
    line = ledger_with(ledger.folder.parent / "other", 1).path.read_bytes()
    with ledger.path.open("ab") as f:
        f.write(line[: len(line) // 2])  # a writer died mid-append: the head was never moved
    verdict = verify(ledger.folder)
    assert verdict.ok and verdict.records == 10
    assert verdict.pending_bytes == len(line) // 2
    record = ledger.append(RecordKind.USAGE, usage())
    assert record.seq == 10
    after = verify(ledger.folder)
    assert after.ok and after.records == 11 and after.pending_bytes == 0


def test_a_clock_set_back_between_records(tmp_path: Path) -> None:
    clock = StepClock()
    ledger = ledger_with(tmp_path / "ledger", 5, clock)
    clock.wall_ns -= 3600 * SECOND  # someone sets the system clock back an hour
    ledger.append(RecordKind.USAGE, usage())
    finding, seq, message = _problem(ledger)
    assert (finding, seq) == (Finding.CLOCK_BACK, 5)
    assert "the clock was set back 3600 s between record 4 and it" in message


def test_ntp_sized_corrections_and_reboots_are_not_clock_rollback(tmp_path: Path) -> None:
    clock = StepClock()
    ledger = ledger_with(tmp_path / "ledger", 3, clock)
    clock.wall_ns -= 2 * SECOND  # an NTP step
    ledger.append(RecordKind.USAGE, usage())
    clock.boot, clock.mono_ns = "boot-2", 5 * SECOND  # a reboot: monotonic starts again
    ledger.append(RecordKind.USAGE, usage())
    assert verify(ledger.folder).ok
    clock.boot, clock.wall_ns = "boot-3", clock.wall_ns - 86400 * SECOND  # back a day, rebooted
    ledger.append(RecordKind.USAGE, usage())
    assert _problem(ledger)[:2] == (Finding.CLOCK_BACK, 5)


@pytest.mark.parametrize(
    ("body", "finding", "text"),
    [
        (usage(busy_ns=-5), Finding.NEGATIVE, "busy_ns -5 is negative"),
        (usage(calls=-1), Finding.NEGATIVE, "calls -1 is negative"),
        (usage(busy_ns=10**22), Finding.ABSURD, "busy_ns 10000000000000000000000 is absurd"),
        (usage(busy_ns=4000 * SECOND), Finding.ABSURD, "more than 64 devices' worth"),
        (usage(calls=10**15), Finding.ABSURD, "calls 1000000000000000 is absurd"),
        ({**usage(), "calls": "12"}, Finding.ABSURD, "calls must be an integer"),
    ],
)
def test_negative_or_absurd_usage_values(
    tmp_path: Path, body: dict[str, object], finding: Finding, text: str
) -> None:
    ledger = ledger_with(tmp_path / "ledger", 2)
    ledger.append(RecordKind.USAGE, body)
    got, seq, message = _problem(ledger)
    assert (got, seq) == (finding, 2) and text in message


def test_a_line_that_is_not_a_record(ledger: Ledger) -> None:
    ls = lines(ledger)
    ls[2] = b'{"seq": 2}\n'
    rewrite(ledger, ls)
    finding, seq, message = _problem(ledger)
    assert (finding, seq) == (Finding.MALFORMED, 2) and "missing body, boot" in message


def test_a_missing_head_is_reported(ledger: Ledger) -> None:
    ledger.head_path.unlink()
    assert _problem(ledger)[0] is Finding.TRUNCATED
