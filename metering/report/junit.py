"""A report as JUnit XML: one test case per validity check, plus the speedup gate."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from luminal.metering.report.view import fmt_speedup, view


def render(statement: Mapping[str, Any], fail_below: float | None = None) -> str:
    v = view(statement)
    cases: list[tuple[str, str | None, str]] = [
        (c["name"], None if c["ok"] else c["detail"], c["detail"]) for c in v.checks
    ]
    if fail_below is not None:
        if v.headline is None:  # INVALID: no speedup to compare
            detail = f"the run is INVALID: no speedup to hold against {fail_below:g}"
            cases.append((f"speedup >= {fail_below:g}", detail, detail))
        else:
            ok = v.headline["lower"] >= fail_below
            detail = f"speedup {fmt_speedup(v.headline)}; lower bound must be >= {fail_below:g}"
            cases.append((f"speedup >= {fail_below:g}", None if ok else detail, detail))
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"luminal bench: {v.title}",
        tests=str(len(cases)),
        failures=str(sum(1 for _, f, _ in cases if f)),
        errors="0",
        timestamp=v.created,
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("verdict", v.verdict),
        ("speedup", fmt_speedup(v.headline) if v.headline else "not billable (INVALID)"),
        ("savings", v.savings_line),
        *((("fix", v.fix),) if v.fix else ()),
        ("signer", v.signer),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    for name, failure, detail in cases:
        case = ET.SubElement(suite, "testcase", classname="luminal.bench", name=name, time="0")
        if failure:
            ET.SubElement(case, "failure", message=failure, type="InvalidResult").text = failure
        else:
            ET.SubElement(case, "system-out").text = detail
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
