"""Run the ONNX conformance suite through luminal's ONNX backend; print and write the table.

    python -m tools.conformance --json build/conformance.json       (from the repository root)

The cases are `onnx.backend.test.BackendTest`'s own test functions, for the suites the
installed `onnx` ships: `node` (one op per case, about 1,900, with expected outputs from
the operator definitions) and the `simple`, `pytorch-converted` and `pytorch-operator`
models.  (`real` and `light` download or synthesize large zoo models and are not run.)
Each case runs on the CPU device and ends in one status:

    passed       every output matches the suite's expected output (the suite's own check:
                 shape, dtype, and allclose with the case's rtol/atol)
    unsupported  UnsupportedOp: an op, attribute, element type or opset luminal declines
    failed       another LuminalError: a clear error, but not a declared unsupported op
    imprecise    outputs miss the case's rtol/atol, but every element is within 4 ulps (of
                 the output's type) of the tensor's largest expected magnitude: the same
                 function, with round-off in the expected output or in ours (a DFT whose
                 expected exact zeros hold float32 FFT noise).  Not counted as passed.
    wrong        the backend returned outputs that do not match: a silent wrong answer
    crashed      any other exception: a bug
    timeout      the case ran past --timeout seconds (its worker is killed)

Cases run in a pool of worker processes (`--jobs`).  `--expected` names the reasoned
expected-failure list (TOML): every case that does not pass must match one of its
entries, and the exit status is non-zero when a case is wrong, crashed, timed out, or
fails without being expected.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import sys
import time
import tomllib
import traceback
import unittest
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tools.conformance.roundoff import within_roundoff

KINDS = {
    "node": "NodeModel",
    "simple": "SimpleModel",
    "pytorch-converted": "PyTorchConvertedModel",
    "pytorch-operator": "PyTorchOperatorModel",
}
STATUSES = ("passed", "unsupported", "failed", "imprecise", "wrong", "crashed", "timeout")
BAD = ("wrong", "crashed", "timeout")  # must not happen


@dataclass(frozen=True)
class Case:
    name: str  # BackendTest's name without the device suffix, e.g. "test_abs"
    kind: str  # a key of KINDS
    op: str  # the op under test (node cases), else the suite's name


@dataclass
class Result:
    name: str
    kind: str
    op: str
    status: str
    seconds: float
    message: str = ""
    expected: str = ""  # category of the expected-failure entry it matches, if any


# ---- the cases -----------------------------------------------------------------------


def backend_test() -> Any:
    """BackendTest over luminal's backend, with its test items by category."""
    import onnx.backend.test

    from luminal.integrations.onnx_backend import LuminalBackend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # case generators warn about their own inputs
        return onnx.backend.test.BackendTest(LuminalBackend, __name__)


def collect(test: Any, kinds: Iterable[str]) -> list[Case]:
    ops = _node_ops()
    out = []
    for kind in kinds:
        for full in sorted(test._test_items[KINDS[kind]]):
            if full.endswith("_cpu"):
                name = full[: -len("_cpu")]
                op = ops.get(re.sub(r"_expanded.*$", "", name), "?") if kind == "node" else kind
                out.append(Case(name, kind, op))
    return out


def _node_ops() -> dict[str, str]:
    """Node case name -> the op it tests (an `_expanded` case tests its op's function
    body and is filed under that op)."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return {c.name: c.model.graph.node[0].op_type for c in cases if len(c.model.graph.node) == 1}


def run_one(test: Any, case: Case) -> tuple[str, str]:
    """Run one case with BackendTest's own test function; (status, message)."""
    from luminal.errors import LuminalError, UnsupportedOp

    item = test._test_items[KINDS[case.kind]][case.name + "_cpu"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            item.func(None)
    except unittest.SkipTest as err:
        return "unsupported", f"skipped: {err}"
    except UnsupportedOp as err:
        return "unsupported", _line(err)
    except LuminalError as err:
        return "failed", f"{type(err).__name__}: {_line(err)}"
    except BaseException as err:
        frames = {f.name for f in traceback.extract_tb(err.__traceback__)}
        status = "wrong" if "assert_similar_outputs" in frames else "crashed"
        if status == "wrong" and within_roundoff(case):
            status = "imprecise"
        where = traceback.extract_tb(err.__traceback__)[-1]
        at = f" at {Path(where.filename).name}:{where.lineno}" if status == "crashed" else ""
        return status, f"{type(err).__name__}{at}: {_line(err)}"
    return "passed", ""


def _line(err: BaseException, limit: int = 400) -> str:
    text = " ".join(str(err).split())
    return text[:limit] + ("..." if len(text) > limit else "")


# ---- the pool ------------------------------------------------------------------------

_TEST: Any = None  # the BackendTest the forked workers inherit


def _worker(conn: multiprocessing.connection.Connection) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"  # the pool is the parallelism
    while True:
        msg = conn.recv()
        if msg is None:
            return
        start = time.perf_counter()
        status, message = run_one(_TEST, msg)
        conn.send((status, message, time.perf_counter() - start))


def run_all(
    test: Any, cases: Sequence[Case], jobs: int, timeout: float, progress: bool = True
) -> list[Result]:
    global _TEST
    _TEST = test
    ctx = multiprocessing.get_context("fork")
    todo = collections.deque(cases)
    results: dict[str, Result] = {}
    busy: dict[Any, tuple[Any, Case, float]] = {}  # conn -> (process, case, started)
    idle: list[tuple[Any, Any]] = []

    def spawn() -> tuple[Any, Any]:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    idle = [spawn() for _ in range(max(1, min(jobs, len(cases))))]
    done = 0
    while todo or busy:
        while todo and idle:
            proc, conn = idle.pop()
            case = todo.popleft()
            conn.send(case)
            busy[conn] = (proc, case, time.monotonic())
        ready = multiprocessing.connection.wait(list(busy), timeout=1.0)
        now = time.monotonic()
        for conn in ready:
            proc, case, started = busy.pop(conn)
            try:
                status, message, seconds = conn.recv()
                idle.append((proc, conn))
            except EOFError:  # the worker died (a signal, or the process aborted)
                status, message, seconds = "crashed", "worker process died", now - started
                proc.join()
                idle.append(spawn())
            results[case.name + case.kind] = Result(
                case.name, case.kind, case.op, status, round(seconds, 3), message
            )
            done += 1
            if progress:
                _progress(done, len(cases), case, status)
        for conn, (proc, case, started) in list(busy.items()):
            if now - started > timeout:
                proc.kill()
                proc.join()
                busy.pop(conn)
                results[case.name + case.kind] = Result(
                    case.name, case.kind, case.op, "timeout", round(now - started, 3),
                    f"no result after {timeout:.0f} s",
                )  # fmt: skip
                done += 1
                idle.append(spawn())
    for proc, conn in idle:
        conn.send(None)
        proc.join(timeout=5)
    return [results[c.name + c.kind] for c in cases]


def _progress(done: int, total: int, case: Case, status: str) -> None:
    if status != "passed" or done % 100 == 0 or done == total:
        mark = "" if status == "passed" else f"  {status}: {case.name}"
        print(f"[{done}/{total}]{mark}", file=sys.stderr, flush=True)


# ---- expected failures and the report -------------------------------------------------


@dataclass(frozen=True)
class Expected:
    category: str
    reason: str
    patterns: tuple[re.Pattern[str], ...]
    out_of_scope: bool  # a type the issue allows to be declared unsupported

    def matches(self, name: str) -> bool:
        return any(p.fullmatch(name) for p in self.patterns)


def load_expected(path: Path) -> list[Expected]:
    data = tomllib.loads(path.read_text())
    return [
        Expected(
            e["category"],
            " ".join(e["reason"].split()),
            tuple(re.compile(p) for p in e["cases"]),
            bool(e.get("out_of_scope", False)),
        )
        for e in data["expected"]
    ]


def apply_expected(results: Sequence[Result], expected: Sequence[Expected]) -> None:
    for r in results:
        hit = next((e for e in expected if e.matches(r.name)), None)
        r.expected = hit.category if hit else ""


def summarize(results: Sequence[Result], expected: Sequence[Expected]) -> dict[str, Any]:
    def counts(rows: Iterable[Result]) -> dict[str, int]:
        c = collections.Counter(r.status for r in rows)
        out = {s: c.get(s, 0) for s in STATUSES}
        out["total"] = sum(out.values())
        return out

    by_kind = {
        k: counts(r for r in results if r.kind == k) for k in dict.fromkeys(r.kind for r in results)
    }
    by_op = {
        op: counts(r for r in results if r.kind == "node" and r.op == op)
        for op in sorted({r.op for r in results if r.kind == "node"})
    }
    node = [r for r in results if r.kind == "node"]
    scoped_out = {e.category for e in expected if e.out_of_scope}
    in_scope = [r for r in node if not (r.status != "passed" and r.expected in scoped_out)]
    passed = sum(r.status == "passed" for r in node)
    categories = collections.Counter(
        r.expected for r in results if r.expected and r.status != "passed"
    )
    return {
        "totals": counts(results),
        "by_kind": by_kind,
        "node_pass_rate": passed / len(node) if node else None,
        "node_pass_rate_in_scope": passed / len(in_scope) if in_scope else None,
        "node_out_of_scope": len(node) - len(in_scope),
        "by_op": by_op,
        "expected_failure_categories": dict(categories.most_common()),
        "unexpected_failures": [r.name for r in results if r.status != "passed" and not r.expected],
        "unexpected_passes": [r.name for r in results if r.status == "passed" and r.expected],
        "bad": [r.name for r in results if r.status in BAD],
    }


def format_table(summary: dict[str, Any]) -> str:
    cols = (*STATUSES, "total")
    head = f"{'op':<28}" + "".join(f"{c:>12}" for c in cols)
    rule = "-" * len(head)
    lines = [head, rule]
    for op, c in summary["by_op"].items():
        lines.append(f"{op:<28}" + "".join(f"{c[k]:>12}" for k in cols))
    lines.append(rule)
    for kind, c in summary["by_kind"].items():
        lines.append(f"{'[' + kind + ']':<28}" + "".join(f"{c[k]:>12}" for k in cols))
    t = summary["totals"]
    lines.append(f"{'TOTAL':<28}" + "".join(f"{t[k]:>12}" for k in cols))
    if summary["node_pass_rate"] is not None:
        node = summary["by_kind"]["node"]
        scoped = node["total"] - summary["node_out_of_scope"]
        lines.append(
            f"node cases passed: {node['passed']} of {node['total']} "
            f"({summary['node_pass_rate']:.1%}); {summary['node_pass_rate_in_scope']:.1%} of the "
            f"{scoped} whose types are in scope (string, sequence, optional and map declared "
            "unsupported)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every case's result and the totals here")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated suites")
    parser.add_argument("--filter", default="", help="regex on case names (re.search)")
    parser.add_argument("--expected", type=Path, help="the expected-failure list (TOML)")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown suite(s) {unknown}; choose from {list(KINDS)}")
    start = time.perf_counter()
    test = backend_test()
    cases = [c for c in collect(test, kinds) if re.search(args.filter, c.name)]
    print(f"running {len(cases)} cases on {args.jobs} worker(s)", file=sys.stderr)
    results = run_all(test, cases, args.jobs, args.timeout)
    expected = load_expected(args.expected) if args.expected else []
    apply_expected(results, expected)
    summary = summarize(results, expected)
    summary["seconds"] = round(time.perf_counter() - start, 1)
    summary["jobs"] = args.jobs
    print(format_table(summary))
    print(f"wall time {summary['seconds']:.0f} s on {args.jobs} worker(s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {**summary, "cases": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
        print(f"wrote {args.json}")
    problems = list(summary["bad"])
    if args.expected:
        problems += summary["unexpected_failures"]
        if summary["unexpected_passes"]:
            print(
                f"note: {len(summary['unexpected_passes'])} case(s) pass but are listed as expected failures"
            )
    for name in problems[:50]:
        r = next(r for r in results if r.name == name)
        print(f"  {r.status}{'' if r.expected else ' (not expected)'}: {name}: {r.message}")
    return 1 if problems else 0
