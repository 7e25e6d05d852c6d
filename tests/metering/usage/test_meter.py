"""Usage in the runtime: counted in memory, flushed by the timer, at exit and on close; a
crash loses at most one interval; the device count is checked where artifacts run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import luminal
from luminal.cli.app import app
from luminal.licensing.home import Home
from luminal.metering.ledger import Ledger, RecordKind, verify
from luminal.metering.usage import MeterConfig
from tests.helpers.ledger_helpers import ARTIFACT, usage
from tests.helpers.licensing_helpers import Vendor, make_terms

ROOT = Path(__file__).resolve().parents[3]


def _usage(home: Home) -> list[dict[str, object]]:
    return [dict(r.body) for r in Ledger.of(home).records() if r.kind is RecordKind.USAGE]


def test_runs_touch_no_file_until_a_flush_and_close_records_them(
    gemm_artifact, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    path, _, feeds = gemm_artifact
    home = Home(tmp_path / "home")
    session = luminal.load(path, meter=MeterConfig(interval_s=3600, home=home))
    for _ in range(100):
        session.run(feeds)
    assert not (home.root / "ledger").exists()  # no I/O on the inference path
    session.close()
    session.close()  # idempotent: recorded once
    (body,) = _usage(home)
    assert body["calls"] == 100 and body[
        "artifact"
    ] == luminal.compiler.runtime.session.artifact_id(path)
    assert 0 < int(body["busy_ns"]) <= int(body["window_ns"])  # type: ignore[call-overload]
    assert str(body["device"]).startswith("cpu:") and body["over_entitlement"] is False
    assert verify(home.root / "ledger").ok


def test_the_timer_flushes_while_the_session_lives(gemm_artifact, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _, feeds = gemm_artifact
    home = Home(tmp_path / "home")
    with luminal.load(path, meter=MeterConfig(interval_s=0.05, home=home)) as session:
        for _ in range(7):
            session.run(feeds)
        deadline = time.monotonic() + 10
        while not _usage(home) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sum(int(b["calls"]) for b in _usage(home)) == 7  # type: ignore[call-overload]
        session.run(feeds)
    assert sum(int(b["calls"]) for b in _usage(home)) == 8  # type: ignore[call-overload]


def test_unmetered_sessions_record_nothing(gemm_artifact, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path, _, feeds = gemm_artifact
    monkeypatch.setenv("LUMINAL_HOME", str(tmp_path / "home"))
    with luminal.load(path, meter=None, trust_unsigned=True) as session:
        session.run(feeds)
    assert session.meter is None and not (tmp_path / "home" / "ledger").exists()


CHILD = """
import os, signal, sys, time
import numpy as np
import luminal
from luminal.licensing.home import Home
from luminal.metering.usage import MeterConfig
from pathlib import Path
path, home, how = sys.argv[1], Home(Path(sys.argv[2])), sys.argv[3]
s = luminal.load(path, trust_unsigned=True, meter=MeterConfig(interval_s=0.1, home=home))
feeds = {"in0": np.ones((3, 8), np.float32)}
for _ in range(5):
    s.run(feeds)
time.sleep(0.6)   # several intervals: the 5 calls are on disk
for _ in range(3):
    s.run(feeds)  # less than an interval before the end
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(0)       # never closed: the exit hook flushes
"""


def test_exit_flushes_and_a_crash_loses_at_most_one_interval(gemm_artifact, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = gemm_artifact[0]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT.parent), *sys.path])}
    homes = {how: Home(tmp_path / how) for how in ("exit", "kill")}
    procs = {
        how: subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(h.root), how], env=env)
        for how, h in homes.items()
    }
    codes = {how: p.wait(timeout=120) for how, p in procs.items()}
    assert codes == {"exit": 0, "kill": -9}
    calls = {how: sum(int(b["calls"]) for b in _usage(h)) for how, h in homes.items()}  # type: ignore[call-overload]
    assert calls == {"exit": 8, "kill": 5}
    assert verify(homes["kill"].root / "ledger").ok


def test_more_devices_than_the_license_allows_is_recorded_not_refused(
    gemm_artifact, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    path, _, feeds = gemm_artifact
    home = Home(tmp_path / "home")
    vendor = Vendor.create(tmp_path / "vendor")
    lic = vendor.write_license(tmp_path / "license.json", None, terms=make_terms(devices=1))
    runner = CliRunner(env={"LUMINAL_HOME": str(home.root)})
    for args in (
        ["license", "trust", str(vendor.pub_path), "--evaluation"],
        ["license", "install", str(lic)],
    ):
        assert runner.invoke(app, args).exit_code == 0
    # another device ran an artifact of this install an hour ago
    Ledger.of(home).append(RecordKind.USAGE, usage(device="cuda:another-gpu"))
    with caplog.at_level(logging.WARNING, "luminal.metering"):
        with luminal.load(path, trust_unsigned=True, meter=MeterConfig(3600, home)) as session:
            assert session.run(feeds)  # inference never stops
    mine = _usage(home)[-1]
    assert mine["over_entitlement"] is True
    assert "allows 1 device(s); 2 ran artifacts in the last 24 h" in caplog.text
    kinds = [r.kind for r in Ledger.of(home).records()]
    assert kinds == [RecordKind.USAGE, RecordKind.LICENSE_INSTALLED, RecordKind.USAGE]
    rc = runner.invoke(app, ["meter", "show", "--json"])
    assert rc.exit_code == 0, rc.output
    lines = {ln["artifact"]: ln for ln in json.loads(rc.stdout)["lines"]}
    ran = lines[str(mine["artifact"])]
    assert ran["over_entitlement_hours"] == ran["device_hours"] != "0"
    assert lines[ARTIFACT]["over_entitlement_hours"] == "0"  # the other device was within it


def test_an_inference_session_is_metered_and_close_flushes(
    gemm_artifact, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    path, _, feeds = gemm_artifact
    home = Home(tmp_path / "home")
    monkeypatch.setenv("LUMINAL_HOME", str(home.root))
    sess = luminal.InferenceSession(str(path), trust_unsigned=True)
    for _ in range(3):
        sess.run(None, feeds)
    assert not home.ledger.exists()
    sess.close()
    assert [b["calls"] for b in _usage(home)] == [3]
