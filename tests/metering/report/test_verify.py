"""`luminal report verify`: the signature, and every derived number from the raw timings."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from luminal.licensing import dsse
from luminal.licensing.home import Home
from luminal.licensing.identity import load_or_create
from luminal.metering.report import sign_and_write
from tests.helpers.bench_helpers import fake_run, honest, licensed_terms


@pytest.fixture
def report(tmp_path: Path) -> Path:
    path = tmp_path / "report.json"
    sign_and_write(fake_run(honest(2.0, 0.02), sigma=0.02, terms=licensed_terms("1.50")), path)
    return path


def _edit(path: Path, change: Callable[[dict[str, Any]], None], *, resign: bool) -> None:
    """Change the Statement; with `resign`, sign it again with the install key (what a
    forger holding the key, or a buggy producer, would write)."""
    env = dsse.Envelope.loads(path.read_bytes())
    statement = json.loads(env.payload)
    change(statement)
    payload = json.dumps(statement).encode()
    if resign:
        env = load_or_create(Home.resolve()).sign(env.payload_type, payload)
    else:
        env = dsse.Envelope(env.payload_type, payload, env.signatures)
    path.write_bytes(env.dumps())


def test_a_fresh_report_verifies(cli, report: Path) -> None:  # type: ignore[no-untyped-def]
    rc, out, err = cli("report", "verify", report)
    assert rc == 0, err
    assert "OK, signed by install key" in out and "VALID" in out
    rc, out, _ = cli("report", "verify", report, "--json")
    data = json.loads(out)
    assert data["ok"] and data["compared"] > 60 and data["savings"]["claimed"]


def _timing(s: dict[str, Any]) -> None:
    s["predicate"]["scenarios"]["latency"]["measurement"]["arms"]["luminal"]["blocks"][3][0] -= 1000


def _statistic(s: dict[str, Any]) -> None:
    s["predicate"]["results"]["scenarios"]["latency"]["luminal"]["p50_ns"] *= 0.9


def _speedup(s: dict[str, Any]) -> None:
    s["predicate"]["results"]["speedup"]["lower"] += 0.05


@pytest.mark.parametrize("change", [_timing, _statistic, _speedup])
def test_an_edited_report_fails_even_when_signed_again(cli, report: Path, change) -> None:  # type: ignore[no-untyped-def]
    _edit(report, change, resign=False)
    rc, _, err = cli("report", "verify", report)
    assert rc == 4 and "changed after signing" in err
    _edit(report, lambda s: None, resign=True)  # now the signature is good again ...
    rc, _, err = cli("report", "verify", report)
    assert rc == 4 and "recomputed from the raw data" in err  # ... but the numbers are not
    assert "results." in err and len(err.strip().splitlines()) == 1


def test_one_edited_timing_names_the_statistics_it_breaks(cli, report: Path) -> None:  # type: ignore[no-untyped-def]
    _edit(report, _timing, resign=True)
    rc, _, err = cli("report", "verify", report)
    assert rc == 4 and "results.scenarios.latency.luminal" in err


def test_a_flipped_signature_byte_fails(cli, report: Path) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(report.read_text())
    sig = bytearray(base64.b64decode(data["signatures"][0]["sig"]))
    sig[10] ^= 0x01
    data["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    report.write_text(json.dumps(data))
    rc, _, err = cli("report", "verify", report)
    assert rc == 4 and "does not verify" in err


def test_verify_with_an_explicit_key_and_subject_files(cli, report: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home = Home.resolve()
    rc, _, err = cli("report", "verify", report, "--key", home.install_info)
    assert rc == 0, err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"public_key": base64.b64encode(b"\x01" * 32).decode()}))
    rc, _, err = cli("report", "verify", report, "--key", other)
    assert rc == 4 and "unknown key" in err
    stray = tmp_path / "stray.bin"
    stray.write_bytes(b"not a subject")
    rc, _, err = cli("report", "verify", report, "--file", stray)
    assert rc == 4 and "is not a subject" in err


def test_fail_below_is_the_ci_gate(cli, report: Path) -> None:  # type: ignore[no-untyped-def]
    rc, _, _ = cli("report", "verify", report, "--fail-below", "1.5")
    assert rc == 0
    rc, _, err = cli("report", "verify", report, "--fail-below", "3")
    assert rc == 1 and "below --fail-below 3" in err


def test_an_invalid_run_fails_the_gate_with_exit_5(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers.bench_helpers import WrongArm

    path = tmp_path / "bad.json"
    sign_and_write(fake_run(lambda c: WrongArm(c, 500_000), terms=licensed_terms()), path)
    rc, out, _ = cli("report", "verify", path)
    assert rc == 0 and "INVALID" in out  # authentic and consistent, but INVALID
    rc, _, err = cli("report", "verify", path, "--fail-below", "1.0")
    assert rc == 5 and "parity" in err


def test_not_a_report(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    junk = tmp_path / "junk.json"
    junk.write_text("{}")
    assert cli("report", "verify", junk)[0] == 4
    assert cli("report", "verify", tmp_path / "missing.json")[0] == 2


def test_the_install_key_is_made_on_first_use(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "fresh-home"
    monkeypatch.setenv("LUMINAL_HOME", str(home))
    statement = sign_and_write(fake_run(honest(2.0)), tmp_path / "r.json")
    key = home / "install.key"
    assert key.is_file() and key.stat().st_mode & 0o777 == 0o600
    assert statement["predicate"]["signer"]["keyid"] == load_or_create(Home.resolve()).keyid


def test_a_real_report_carries_what_a_re_run_needs(cli, gemm_artifact, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    from luminal.metering.report import read

    artifact, model, _ = gemm_artifact
    out = tmp_path / "r.json"
    quick = ("--duration", "0.2", "--max-duration", "1", "--min-runs", "10", "--min-blocks", "3")
    quick = (*quick, "--block-ms", "2")
    rc, _, err = cli("bench", artifact, "--model", model, "--threads", "1", "-o", out, *quick)
    assert rc in (0, 5), err  # a short run on a shared machine may be INVALID
    _, statement = read(out)
    p = statement["predicate"]

    def sha(f: Path) -> str:
        return hashlib.sha256(f.read_bytes()).hexdigest()

    assert p["candidate"]["artifact_digests"][0]["sha256"] == sha(artifact)
    assert p["baseline"]["model_sha256"] == sha(model)
    assert p["request"]["baseline"] == "onnxruntime" and p["request"]["threads"] == 1
    assert p["request"]["scenarios"] == ["latency", "throughput"] and p["request"]["seed"] == 0
    assert p["method"]["min_blocks"] == 3 and p["method"]["tolerances"]
    assert p["machine"]["cpu"]["model"] and p["machine"]["cpu"]["logical_cores"] >= 1
    assert p["conditions"]["threads"] == 1 and p["conditions"]["affinity"]
    assert p["software"]["compiler_version"] and p["software"]["onnxruntime"]
    license_file = Home.resolve().license
    assert p["license"] == {
        "id": json.loads(dsse.Envelope.loads(license_file.read_bytes()).payload)["license_id"],
        "sha256": sha(license_file),
    }
    rc, out_text, err = cli("report", "verify", out, "--artifact", artifact, "--model", model)
    assert rc == 0 and "evaluation terms, not billable" in out_text, err
    rc, out_text, _ = cli("report", "show", out)
    assert rc == 0 and "terms: evaluation terms: not a production license" in out_text
