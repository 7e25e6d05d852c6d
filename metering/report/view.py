"""What every rendering of a report shows, formatted once: a plain-data summary of a
Statement (tables as rows of strings) that the table, markdown, HTML and JUnit renderers
lay out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ARMS = (("baseline", "baseline"), ("luminal", "luminal"))
STAT_COLUMNS = ("arm", "p50", "p90", "p99", "mean", "min", "items/s", "runs", "CV")


def fmt_time(ns: float) -> str:
    """Three significant digits: 812ns, 78.2µs, 4.26ms, 1.23s."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= scale:
            return f"{ns / scale:.3g}{unit}"
    return f"{ns:.3g}ns"


def fmt_speedup(s: Mapping[str, Any] | None) -> str:
    if not s:
        return "n/a"
    if s.get("halfwidth") is None:
        return f"{s['point']:.3f}x (no interval: {s.get('pairs', 0)} paired block(s))"
    pct = round(100 * s["confidence"])
    return (
        f"{s['point']:.3f}x [{s['lower']:.3f}, {s['upper']:.3f}] ({pct}% CI, ±{s['halfwidth']:.1%})"
    )


def headline_line(results: Mapping[str, Any]) -> str:
    """The one line a summary ends with: the billable speedup, or why there is none.  An
    INVALID run's numbers are in the JSON (marked `billable: false`) but never headlined."""
    v = results["validity"]
    if not v["valid"]:
        fix = f"; to fix: {v['fix']}" if v.get("fix") else ""
        return f"no speedup to bill on: the run is INVALID{fix}"
    return f"speedup: {fmt_speedup(results['speedup'])}"


@dataclass(frozen=True)
class ScenarioView:
    name: str
    batch: int
    rows: list[list[str]]
    speedup: Mapping[str, Any]
    speedup_line: str  # "speedup 1.23x [...]", or "not billable" for an INVALID run
    timings: dict[str, list[list[int]]]  # arm label -> blocks of per-run ns
    generation_line: str | None = None  # the llm scenario: first token and decode rates


@dataclass(frozen=True)
class ReportView:
    title: str
    baseline: str
    candidate: str
    verdict: str
    reasons: list[str]
    why: list[str]  # the failed checks' details, in words (empty when VALID)
    fix: str | None  # one line: what to do about an INVALID run
    warnings: list[str]
    headline: Mapping[str, Any] | None  # None for an INVALID run: nothing to bill on
    savings: Mapping[str, Any]
    savings_line: str
    scenarios: list[ScenarioView]
    skipped: dict[str, str]
    checks: list[Mapping[str, Any]]
    parity_rows: list[list[str]]
    audit_lines: list[str]
    method_rows: list[list[str]]
    environment_rows: list[list[str]]
    subjects: list[list[str]]
    signer: str
    created: str


def view(statement: Mapping[str, Any]) -> ReportView:
    p = statement["predicate"]
    r = p["results"]
    baseline = f"{p['baseline']['name']} on {p['baseline']['model']}"
    candidate = f"luminal {', '.join(p['candidate']['artifacts'])}"
    scenarios, skipped = [], {}
    for name, sc in p["scenarios"].items():
        if sc.get("skipped"):
            skipped[name] = sc["skipped"]
            continue
        st = r["scenarios"][name]
        rows = []
        for arm, label in ARMS:
            a = st[arm]
            rows.append(
                [
                    label,
                    fmt_time(a["p50_ns"]),
                    fmt_time(a["p90_ns"]),
                    fmt_time(a["p99_ns"]),
                    fmt_time(a["mean_ns"]),
                    fmt_time(a["min_ns"]),
                    f"{a['throughput']:,.0f}",
                    str(a["runs"]),
                    f"{a['cv']:.1%}",
                ]
            )
        timings = {label: sc["measurement"]["arms"][arm]["blocks"] for arm, label in ARMS}
        line = (
            f"speedup {fmt_speedup(st['speedup'])}"
            if r["validity"]["valid"]
            else "speedup not billable (the run is INVALID)"
        )
        gen = st.get("generation")
        scenarios.append(
            ScenarioView(
                name, sc["batch"], rows, st["speedup"], line, timings, gen and generation_line(gen)
            )
        )
    parity_rows = [
        [
            o["name"],
            o["dtype"],
            "OK" if o["ok"] else "MISMATCH",
            _num(o["max_abs"]),
            _num(o["max_rel"]),
            f"{o['mismatched']}/{o['total']}",
            f"rtol {o['rtol']:g}, atol {o['atol']:g}",
        ]
        for o in p["parity"]["outputs"]
    ]
    samples = p["audit"]["test01"]["samples"]
    t04 = r["test04"]
    audit_lines = [
        f"TEST01: {sum(s['ok'] for s in samples)}/{len(samples)} outputs sampled during the "
        "timed run match the baseline",
        "TEST04: " + _test04_line(t04),
    ]
    m = p["method"]
    method_rows = [
        ["duration", f"{m['duration_s']:g} s minimum per scenario (cap {m['max_duration_s']:g} s)"],
        ["runs", f"{m['min_runs']} minimum per arm; {m['min_blocks']} paired blocks minimum"],
        ["block", f"about {m['block_s'] * 1e3:g} ms of runs per arm per round"],
        [
            "warm-up",
            f"until the last {m['warmup_window']} block means agree within "
            f"{m['warmup_tolerance']:.0%} (at most {m['warmup_max_s']:g} s)",
        ],
        [
            "speedup",
            "geometric mean of the per-round ratios baseline block mean / luminal block "
            f"mean, {m['confidence']:.0%} t-interval on their logs",
        ],
        [
            "billable when",
            f"the interval's relative half-width is at most ±{m['target_halfwidth']:.0%} "
            "(rounds continue until it is, up to the cap); billed on its lower bound",
        ],
        ["seed", f"{m['seed']} (block order, audit sampling)"],
        [
            "audits",
            f"TEST01 {m['audit_samples']} sampled outputs; TEST04 {p['audit']['test04']['runs']} "
            f"runs each side, caching when the interval's lower bound exceeds "
            f"{1 + m['audit_threshold']:.2f}x",
        ],
        ["tolerances", ", ".join(f"{k} {v[0]:g}/{v[1]:g}" for k, v in m["tolerances"].items())],
        [
            "threads",
            f"{p['conditions']['threads']} (CPUs {p['conditions']['affinity']}, "
            f"OpenMP {p['conditions']['omp_max_threads']})",
        ],
    ]
    inputs = p["inputs"]
    src = (
        f"seeded (seed {inputs['seed']})"
        if inputs["source"] == "seeded"
        else f"{inputs['file']} (sha256 {inputs['file_sha256'][:16]}...)"
    )
    method_rows.append(["inputs", f"{inputs['sets']} set(s), {src}"])
    mach = p["machine"]
    sw = p["software"]
    environment_rows = [
        [
            "CPU",
            f"{mach['cpu']['model']} ({mach['cpu']['arch']}, {mach['cpu']['logical_cores']} cores)",
        ],
        ["machine fingerprint", mach["fingerprint"]],
        ["OS", mach["os"]],
        ["load average", f"{mach['load_average']['start']} -> {mach['load_average']['end']}"],
        ["baseline", f"{p['baseline']['name']} {_info(p['baseline']['info'])}"],
        [
            "software",
            ", ".join(f"{k} {v}" for k, v in sw.items() if v and v != "unknown" and k != "flags"),
        ],
    ]
    subjects = [[s["name"], s["digest"]["sha256"]] for s in statement["subject"]]
    v = r["validity"]
    return ReportView(
        title=f"luminal vs {p['baseline']['name']}",
        baseline=baseline,
        candidate=candidate,
        verdict=v["verdict"],
        reasons=v["reasons"],
        why=[c["detail"] for c in v["checks"] if not c["ok"]],
        fix=v.get("fix"),
        warnings=v["warnings"],
        headline=r["speedup"] if v["valid"] else None,
        savings=r["savings"],
        savings_line=savings_line(r["savings"]),
        scenarios=scenarios,
        skipped=skipped,
        checks=v["checks"],
        parity_rows=parity_rows,
        audit_lines=audit_lines,
        method_rows=method_rows,
        environment_rows=environment_rows,
        subjects=subjects,
        signer=p["signer"]["keyid"],
        created=p["created"],
    )


def generation_line(g: Mapping[str, Any]) -> str:
    """The llm scenario's phases: luminal against the baseline, medians."""
    lum, base = g["luminal"], g["baseline"]
    ttft = f" ({g['ttft_speedup']:.2f}x)" if g.get("ttft_speedup") else ""
    dec = f" ({g['decode_speedup']:.2f}x)" if g.get("decode_speedup") else ""
    return (
        f"time to first token {lum['ttft_ms']:.2f} ms vs {base['ttft_ms']:.2f} ms{ttft}; "
        f"decode {lum['decode_tokens_per_s']:,.0f} vs {base['decode_tokens_per_s']:,.0f} "
        f"tokens/s{dec}; medians of {lum['runs']} generations per arm"
    )


def savings_line(s: Mapping[str, Any]) -> str:
    if not s["claimed"]:
        return f"no savings claimed: {s['reason']}"
    h, k = s["per_hour"], s["per_1000_hours"]
    cur = h["currency"]
    return (
        f"at {h['price_per_hour']} {cur}/device-hour and speedup lower bound {float(s['speedup']):.3f}: "
        f"savings {k['savings']} {cur} per 1000 h, fee {k['fee']} {cur} (share {s['pricing']['share']}), "
        f"customer keeps {k['customer_keeps']} {cur}"
    )


def _test04_line(t04: Mapping[str, Any]) -> str:
    r = t04["ratio"]
    if r is None or r.get("halfwidth") is None:
        return "not run"
    limit = 1 + t04["threshold"]
    result = {"clear": "OK", "inconclusive": "inconclusive (noise)", "cached": "FAIL (cached)"}
    return (
        f"fresh inputs take {r['point']:.3f}x the time of a repeated input, interval "
        f"[{r['lower']:.3f}, {r['upper']:.3f}]; caching if the lower bound exceeds "
        f"{limit:.2f}x: {result.get(t04['outcome'], t04['outcome'])}"
    )


def _num(x: float | None) -> str:
    return "inf" if x is None else f"{x:.3g}"


def _info(info: Mapping[str, Any]) -> str:
    return "(" + ", ".join(f"{k} {v}" for k, v in info.items()) + ")"
