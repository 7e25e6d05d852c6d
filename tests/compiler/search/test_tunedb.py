"""The tuning database: winners, export/import round trip, refusal of foreign files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from luminal.compiler.schedule.variant import Variant
from luminal.compiler.search.tunedb import Measurement, TuningDB, read_export
from luminal.compiler.search.tuner import Machine
from luminal.errors import UsageError


def _m(variant: Variant, seconds: float, ok: bool = True, kernel: str = "k") -> Measurement:
    return Measurement(
        kernel, "dev", "1.0", variant, seconds, seconds * 2, ok, "contraction", "4x4"
    )


def test_winner_is_the_fastest_correct_variant(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.db") as db:
        db.record(
            [
                _m(Variant(), 3e-6),
                _m(Variant(mr=4, nr=8), 1e-6, ok=False),  # fast but wrong
                _m(Variant(parallel=False), 2e-6),
                _m(Variant(impl="blas"), float("inf")),  # stopped early
            ]
        )
        win = db.winner("k", "dev", "1.0")
        assert win is not None and win.variant == Variant(parallel=False)
        assert db.winner("k", "other-device", "1.0") is None
        assert db.winner("k", "dev", "2.0") is None  # another compiler version


def test_export_import_round_trip(tmp_path: Path) -> None:
    rows = [_m(Variant(), 3e-6), _m(Variant(impl="blas", kc=256), 1e-6, kernel="k2")]
    with TuningDB(tmp_path / "a.db") as a:
        a.record(rows)
        a.record_machine("dev", Machine(100.0, 20.0, 2))
        assert a.export(tmp_path / "x.json") == 2
    with TuningDB(tmp_path / "b.db") as b:
        assert b.import_file(tmp_path / "x.json") == 2
        got = {(m.kernel, m.variant) for m in b.measurements()}
        assert got == {(m.kernel, m.variant) for m in rows}
        assert b.winner("k2", "dev", "1.0").variant == Variant(impl="blas", kc=256)  # type: ignore[union-attr]


def test_clear(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.db") as db:
        db.record([_m(Variant(), 1e-6), _m(Variant(), 1e-6, kernel="k2")])
        db.record_machine("dev", Machine(100.0, 20.0, 2))
        assert db.clear() == 2
        assert db.measurements() == [] and db.machine("dev") is None


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not json", "not a tuning-db export"),
        (b'{"format": "something-else"}', "format tag"),
        (b'{"format": "luminal-tuning-db", "format_version": 99}', "not supported"),
        (
            b'{"format": "luminal-tuning-db", "format_version": 1, "measurements": [{"kernel": "k"}]}',
            "measurement #0 is malformed",
        ),
    ],
)
def test_bad_exports_are_refused_in_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    f = tmp_path / "bad.json"
    f.write_bytes(content)
    with pytest.raises(UsageError, match=message):
        read_export(f)


def test_a_file_that_is_not_a_database_is_a_usage_error(tmp_path: Path) -> None:
    f = tmp_path / "t.db"
    f.write_text(json.dumps({"x": 1}) * 100)
    with pytest.raises(UsageError, match="not a usable tuning database"):
        TuningDB(f)
