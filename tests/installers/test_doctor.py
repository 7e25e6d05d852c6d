"""`luminal doctor`: every check in --json, a clear list and exit 7 when something needed
is missing, and a support bundle without secrets."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from luminal.installers import doctor
from luminal.installers.doctor import CHECKS, Check, DoctorContext, Finding, Status
from luminal.licensing.home import Home


def test_json_on_this_machine_shows_every_check(cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = cli("doctor", "--json")
    doc = json.loads(out)
    assert doc["schema"] == "luminal-doctor/1"
    assert [c["name"] for c in doc["checks"]] == [c.name for c in CHECKS]
    assert {
        "python",
        "packages",
        "toolchain",
        "devices",
        "license",
        "ledger",
        "disk",
        "tuning-db",
        "quiet",
    } <= {c["name"] for c in doc["checks"]}
    for c in doc["checks"]:
        assert c["status"] in ("ok", "warn", "fail") and c["summary"]
    assert rc == (0 if doc["ok"] else 7) and doc["failed"] == [
        c["name"] for c in doc["checks"] if c["status"] == "fail"
    ]
    by = {c["name"]: c for c in doc["checks"]}
    assert by["python"]["detail"]["version"].startswith("3.11")
    assert by["license"]["status"] == "ok"  # the session's evaluation license
    # the session's home: earlier tests' metered runs may have written its ledger
    assert by["ledger"]["status"] == "ok"
    assert by["ledger"]["summary"] == "no ledger yet" or "records verify" in by["ledger"]["summary"]


def test_a_missing_compiler_is_a_clear_failure(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LUMINAL_CC", "no-such-cc-here")
    rc, _, err = cli("doctor")
    assert rc == 7
    assert "FAIL toolchain" in err and "LUMINAL_CC='no-such-cc-here'" in err
    assert "error: doctor: 1 problem(s): toolchain:" in err
    assert "toolchain: install gcc or clang" in err  # what to do, on its own line


def test_a_crashing_or_optional_check_does_not_take_doctor_down(tmp_path: Path) -> None:
    def boom(ctx: DoctorContext) -> Finding:
        raise RuntimeError("probe exploded")

    def missing(ctx: DoctorContext) -> Finding:
        return Finding(Status.FAIL, "gone", fix="install it")

    ctx = DoctorContext(Home(tmp_path), {})
    report = doctor.run_checks(ctx, (Check("a", True, boom, ""), Check("b", False, missing, "")))
    a, b = report.results
    assert a.finding.status is Status.FAIL and "probe exploded" in a.finding.summary
    assert b.finding.status is Status.WARN and b.finding.fix == "install it"
    assert report.failed == (a,) and not report.ok


def test_doctor_creates_nothing_in_a_fresh_home(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LUMINAL_HOME", str(tmp_path / "fresh"))
    rc, out, _ = cli("doctor", "--json")
    by = {c["name"]: c for c in json.loads(out)["checks"]}
    assert rc == (0 if json.loads(out)["ok"] else 7)
    assert by["license"]["status"] == "warn" and "no license installed" in by["license"]["summary"]
    assert not (tmp_path / "fresh").exists()  # an install's doctor run leaves the home alone


def test_the_ledger_check_verifies_the_ledger(tmp_path: Path) -> None:
    from tests.helpers.ledger_helpers import edit, ledger_with, lines, rewrite

    ctx = DoctorContext(Home(tmp_path), {})
    assert doctor.check_ledger(ctx).summary == "no ledger yet"
    ledger = ledger_with(Home(tmp_path).ledger, 3)
    found = doctor.check_ledger(ctx)
    assert found.status is Status.OK and found.summary == "3 records verify"
    edited = lines(ledger)
    edited[1] = edit(edited[1], calls=10**6)
    rewrite(ledger, edited)
    found = doctor.check_ledger(ctx)
    assert found.status is Status.FAIL and "record 1" in found.summary
    assert found.detail["ok"] is False and "meter verify" in found.fix


def test_tuning_db_size(tmp_path: Path) -> None:
    from luminal.compiler.schedule.variant import Variant
    from luminal.compiler.search.tunedb import Measurement, TuningDB

    db = tmp_path / "t.db"
    with TuningDB(db) as t:
        t.record([Measurement("k1", "d", "1", Variant(), 1e-6, 2e-6, True, "contraction", "x")])
    found = doctor.check_tuning_db(DoctorContext(Home(tmp_path), {"LUMINAL_TUNING_DB": str(db)}))
    assert found.detail["measurements"] == 1 and found.detail["bytes"] == db.stat().st_size


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("numpy>=1.26,<3", ("numpy", ">=1.26,<3", "")),
        ('torch>=2.4,<3; extra == "torch"', ("torch", ">=2.4,<3", "torch")),
        ("scipy-openblas32>=0.3.27", ("scipy-openblas32", ">=0.3.27", "")),
    ],
)
def test_requirement_lines(line: str, parsed: tuple[str, str, str]) -> None:
    assert doctor._requirement(line) == parsed


def test_support_bundle_redacts_secrets(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    monkeypatch.setenv("LUMINAL_HOME", str(home))
    monkeypatch.setenv("LUMINAL_ACTIVATION_KEY", "s3cret-activation-value")
    monkeypatch.setenv("HTTPS_PROXY", "http://bob:hunter2@proxy.example:3128")
    from luminal.licensing.identity import load_or_create

    load_or_create(Home(home))
    out = tmp_path / "support.tar.gz"
    rc, _, err = cli("doctor", "--support-bundle", out)
    assert rc in (0, 7) and f"support bundle: {out}" in err
    private = (home / "install.key").read_bytes()
    with tarfile.open(out) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    names = {n.removeprefix("luminal-support/") for n in members}
    assert {"doctor.json", "environment.json", "packages.txt", "home/install.json"} <= names
    assert not any("install.key" in n for n in names)
    for data in members.values():
        assert b"s3cret-activation-value" not in data and b"hunter2" not in data
        assert private not in data and b"PRIVATE KEY" not in data
    env = json.loads(members["luminal-support/environment.json"])
    assert env["LUMINAL_ACTIVATION_KEY"] == "<redacted>"
    assert env["HTTPS_PROXY"] == "http://<redacted>@proxy.example:3128"
    assert env["LUMINAL_HOME"] == str(home)
