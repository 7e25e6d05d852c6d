"""`luminal meter`: one line and exit 4 for a ledger that does not verify; JSON forms."""

from __future__ import annotations

import json
from pathlib import Path

from luminal.metering.ledger import Ledger
from tests.helpers.ledger_helpers import edit, ledger_with, lines, rewrite


def test_verify_names_the_first_bad_record(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ledger = ledger_with(tmp_path / "ledger", 5)
    rc, out, err = cli("meter", "verify", "--ledger", ledger.folder)
    assert rc == 0 and out.strip().endswith("OK, 5 records")
    ls = lines(ledger)
    ls[2] = edit(ls[2], busy_ns=1)
    rewrite(ledger, ls)
    rc, out, err = cli("meter", "verify", "--ledger", ledger.folder)
    assert rc == 4 and out == ""
    assert err.strip() == (
        f"error: ledger {ledger.path}: record 2: its hash does not match its contents "
        "(edited) (2 records verify before it)"
    )
    rc, out, _ = cli("meter", "verify", "--ledger", ledger.folder, "--json")
    assert rc == 4
    assert json.loads(out)["problem"] == {
        "record": 2,
        "finding": "edited",
        "message": "record 2: its hash does not match its contents (edited)",
    }
    rc, _, err = cli("meter", "show", "--ledger", ledger.folder)  # no statement from it
    assert rc == 4 and "record 2: its hash does not match" in err
    rc, _, err = cli("meter", "export", "--ledger", ledger.folder, "-o", tmp_path / "u.json")
    assert rc == 4 and "not exported" in err and not (tmp_path / "u.json").exists()


def test_show_and_export_as_json(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ledger = ledger_with(tmp_path / "home" / "ledger", 3)  # November 2026, 60 s apart
    rc, out, err = cli("meter", "show", "--ledger", ledger.folder, "--period", "2026-11", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["totals"]["calls"] == 1 + 2 + 3 and data["lines"][0]["busy_ns"] == 15 * 10**9
    assert data["lines"][0]["device_hours"].startswith("0.0041666666")  # 15 s
    assert data["lines"][0]["note"] == "no license recorded"
    rc, out, err = cli(
        "meter", "export", "--ledger", ledger.folder, "-o", tmp_path / "u.json", "--json"
    )
    assert rc == 0, err
    info = json.loads(out)
    assert (info["from"], info["tree_size"], info["records"]) == (0, 3, 3)
    assert [r.kind.value for r in Ledger(ledger.folder).records()][-1] == "export-made"
    rc, out, _ = cli(
        "meter", "export", "--ledger", ledger.folder, "-o", tmp_path / "v.json", "--json"
    )
    again = json.loads(out)  # from the last export's end: only its export-made record is new
    assert (again["from"], again["tree_size"], again["records"]) == (3, 4, 1)
    rc, _, err = cli("meter", "show", "--ledger", ledger.folder, "--period", "11-2026")
    assert rc == 2 and "expected a month, YYYY-MM" in err
