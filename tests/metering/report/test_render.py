"""Renderings of a report: table, self-contained HTML, markdown, JUnit, JSON."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path

import numpy as np
import pytest

from luminal.metering.bench.method import MethodSettings
from luminal.metering.report import charts, read, sign_and_write
from luminal.metering.report.view import ScenarioView
from tests.helpers.bench_helpers import (
    FAST,
    PRICING,
    CachingArm,
    FakeArm,
    fake_run,
    honest,
    licensed_terms,
)


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
    rc, out, err = cli("report", "show", reports["bad"], "--format", "junit", "--fail-below", "1.1")
    assert rc == 5 and "INVALID" in err  # the XML is written, then the gate holds (help says so)
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


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An INVALID report: honest but noisy, capped before its interval got to +-5%."""
    path = tmp_path_factory.mktemp("wide") / "wide.json"
    method = MethodSettings(**{**FAST.__dict__, "max_duration_s": 0.6})
    cand = lambda c: FakeArm(c, 1e6 / 1.5, sigma=0.6, seed=3)  # noqa: E731
    sign_and_write(fake_run(cand, sigma=0.6, method=method, terms=licensed_terms("1.50")), path)
    return path


def test_an_invalid_run_shows_why_and_what_to_do_but_no_speedup(cli, wide, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, statement = read(wide)
    results = statement["predicate"]["results"]
    point = f"{results['speedup']['point']:.3f}x"
    why = "wider than the ±5% needed to bill on"
    rc, out, _ = cli("report", "show", wide)
    assert rc == 0 and "INVALID: why" in out and why in out.replace("\n│ ", " ")
    assert "To fix: run longer with --duration" in out and point not in out
    page = tmp_path / "w.html"
    assert cli("report", "show", wide, "--format", "html", "-o", page)[0] == 0
    html = page.read_text()
    assert "This run is INVALID" in html and why in html and "What to do:</b> run longer" in html
    assert point not in html and "class='big'" not in html
    assert html.count("<svg") == 2  # no speedup chart: distribution and block means only
    rc, out, _ = cli("report", "show", wide, "--format", "markdown")
    assert "**Why INVALID**" in out and "**To fix**: run longer" in out
    assert "**Speedup**" not in out and point not in out
    rc, out, _ = cli("report", "show", wide, "--format", "junit", "--fail-below", "1.1")
    props = {p.get("name"): p.get("value") for p in ET.fromstring(out).iter("property")}
    assert props["speedup"] == "not billable (INVALID)" and "--duration" in props["fix"]
    rc, out, _ = cli("report", "verify", wide)
    assert rc == 0 and "no speedup to bill on" in out and point not in out
    assert results["speedup"]["billable"] is False  # --json and the report keep the numbers


def _boxes(svg: str) -> tuple[float, float, list[tuple[float, float, float, float, str]]]:
    """The SVG's size and each label's estimated box (left, top, right, bottom, text)."""
    w, h = (float(v) for v in re.match(r"<svg width='([\d.]+)' height='([\d.]+)'", svg).groups())  # type: ignore[union-attr]
    boxes = []
    for attrs, text in re.findall(r"<text ([^>]*)>([^<]*)</text>", svg):
        found = dict(re.findall(r"([\w-]+)='([^']*)'", attrs))
        x, y, anchor = found["x"], found["y"], found.get("text-anchor", "start")
        text = unescape(text)
        width = charts.text_width(text)
        left = float(x) - {"start": 0, "middle": width / 2, "end": width}[anchor]
        boxes.append((left, float(y) - 9, left + width, float(y) + 3, text))
    assert boxes and svg.count("<text") == len(boxes)
    return w, h, boxes


def _assert_readable(svg: str) -> None:
    w, h, boxes = _boxes(svg)
    for left, top, right, bottom, text in boxes:
        assert 0 <= left and right <= w and 0 <= top and bottom <= h, f"{text!r} is clipped"
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
            assert apart, f"labels {a[4]!r} and {b[4]!r} overlap"


def _scenario(name: str, point: float, lower: float, upper: float) -> ScenarioView:
    speedup = {"point": point, "lower": lower, "upper": upper, "confidence": 0.95}
    return ScenarioView(name, 1, [], speedup, "", {})


@pytest.mark.parametrize(
    "intervals",
    [
        [(1.02, 0.99, 1.05)],
        [(1.005, 0.98, 1.03)],  # the point label on the 1.0 line
        [(155.7, 150.0, 161.0), (2.0, 1.9, 2.1)],  # far from 1.0, two scenarios
        [(0.5, 0.45, 0.56), (1.001, 1.0, 1.002)],
    ],
)
def test_the_speedup_chart_keeps_labels_inside_and_apart(intervals) -> None:  # type: ignore[no-untyped-def]
    names = ("latency", "throughput")
    _assert_readable(
        charts.speedup_svg([_scenario(names[i], *iv) for i, iv in enumerate(intervals)])
    )


@pytest.mark.parametrize("rounds", [1, 7, 40, 250])
def test_the_timing_charts_keep_labels_inside_and_apart(rounds: int) -> None:
    rng = np.random.default_rng(rounds)
    timings = {
        "baseline": [list(rng.lognormal(14, 0.3, 10).astype(int)) for _ in range(rounds)],
        # a long tail: p99 at the right edge of the axis
        "luminal": [list(rng.lognormal(13, 1.0, 25).astype(int)) for _ in range(rounds)],
    }
    _assert_readable(charts.distribution_svg(timings))
    blocks = charts.blocks_svg(timings)
    _assert_readable(blocks)
    legend = [b[4] for b in _boxes(blocks)[2] if b[1] < 20]
    assert legend[:2] == ["baseline", "luminal"]  # the legend, above the plot
    assert blocks.count("stroke-width='3'") == 2  # each with a swatch of its line


def test_github_action_benchmark_entries_rederive_from_the_report(reports) -> None:  # type: ignore[no-untyped-def]
    from luminal.metering.report import benchmark_action

    _, statement = read(reports["good"])
    entries = benchmark_action.render(statement)
    stats = statement["predicate"]["results"]["scenarios"]
    measured = [
        (n, arm)
        for n in statement["predicate"]["scenarios"]
        if n in stats
        for arm in ("baseline", "luminal")
    ]
    assert len(entries) == len(measured)
    for entry, (name, arm) in zip(entries, measured, strict=True):
        assert set(entry) == {"name", "unit", "value", "range", "extra"} and entry["unit"] == "ms"
        assert name in entry["name"] and entry["name"].endswith(f"{arm} p50")
        assert entry["value"] == pytest.approx(stats[name][arm]["p50_ns"] / 1e6, rel=1e-6)
        assert "speedup" in entry["extra"] and "VALID" in entry["extra"]
    json.dumps(entries)  # what the action reads
