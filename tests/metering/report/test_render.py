"""Renderings of a report: table, self-contained HTML, markdown, JUnit, JSON."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from luminal.metering.report import sign_and_write
from tests.helpers.bench_helpers import PRICING, CachingArm, fake_run, honest


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("reports")
    good, bad = folder / "good.json", folder / "bad.json"
    sign_and_write(fake_run(honest(2.0, 0.02), sigma=0.02, pricing=PRICING), good)
    sign_and_write(fake_run(lambda c: CachingArm(c, 500_000)), bad)
    return {"good": good, "bad": bad}


def test_table(cli, reports) -> None:  # type: ignore[no-untyped-def]
    rc, out, err = cli("report", "show", reports["good"])
    assert rc == 0, err
    for fragment in (
        "VALID",
        "latency (batch 2)",
        "baseline",
        "luminal",
        "p99",
        "test04",
        "savings",
    ):
        assert fragment in out


def test_html_is_self_contained_with_plots(cli, reports, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    page = tmp_path / "r.html"
    rc, out, err = cli("report", "show", reports["good"], "--format", "html", "-o", page)
    assert rc == 0 and out.strip() == str(page), err
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "</html>" in html
    assert not re.search(r"<script|<link|src=|@import|url\(", html)  # nothing external
    assert html.count("<svg") == 3  # speedup interval, distribution, block means
    assert "aria-label='latency distribution per arm'" in html
    assert "1.0 (no change)" in html and "VALID" in html


def test_markdown_for_the_step_summary(cli, reports) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = cli("report", "show", reports["bad"], "--format", "markdown")
    assert rc == 0
    assert out.startswith("## luminal vs fake: ❌ INVALID")
    assert "| arm | p50 |" in out and "test04" in out and "Why INVALID" in out


def test_junit_has_one_case_per_check_and_the_gate(cli, reports) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = cli("report", "show", reports["bad"], "--format", "junit", "--fail-below", "1.1")
    assert rc == 0
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert "speedup >= 1.1" in cases and "parity" in cases
    assert cases["test04"].find("failure") is not None
    assert cases["parity"].find("failure") is None
    assert int(suite.get("failures", "0")) >= 1


def test_json_is_the_statement(cli, reports) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = cli("report", "show", reports["good"], "--format", "json")
    assert rc == 0
    data = json.loads(out)
    assert data["_type"] == "https://in-toto.io/Statement/v1"
    assert [s["name"] for s in data["subject"]] == [
        "artifact:model.lmnl",
        "baseline-model:model.onnx",
        "inputs",
    ]
    assert cli("report", "show", reports["good"], "--format", "pdf")[0] == 2


@pytest.mark.skipif(
    not (shutil.which("chromium") or shutil.which("chromium-browser")),
    reason="headless Chromium is not installed (apt-get install chromium); "
    "benchmarks/render_report.py takes the same screenshot by hand",
)
def test_html_renders_in_headless_chromium(cli, reports, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.render_report import screenshot

    page = tmp_path / "r.html"
    assert cli("report", "show", reports["good"], "--format", "html", "-o", page)[0] == 0
    png = screenshot(page, tmp_path / "r.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
