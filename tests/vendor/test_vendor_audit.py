"""`luminal-vendor audit`: the same bench re-run, the customer's claim against its interval.

On a fake machine first (fake arms on a fake clock, `bench_helpers`: the re-run is the same
arms with other noise), so the verdicts are exact: a fresh report agrees; one whose
candidate timings were rewritten 20% slower (a smaller speedup, a smaller fee), re-derived
and re-signed with the install key itself, which every signature and arithmetic check
accepts, lies below the reproduced interval (exit 1).  Then the same on this machine with a
real bench (`slow`: on a loaded shared machine, the intervals of a short run are too wide to
tell 20% apart; see `AuditResult.finding`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from luminal.compiler.frontend.onnx import load as load_onnx
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.licensing.home import Home
from luminal.licensing.identity import load_or_create
from luminal.licensing.keys import encode_public
from luminal.metering.bench import BenchRequest, MethodSettings, run_bench
from luminal.metering.bench.run import BenchRun
from luminal.metering.report import sign_and_write
from luminal_vendor import audit as audit_module
from tests.helpers.bench_helpers import FAST, fake_run, honest, licensed_terms
from tests.helpers.licensing_helpers import vendor_cli
from tests.vendor.conftest import Customer, forge


def _slower(s: dict[str, Any]) -> None:
    """Every candidate timing 20% slower: a smaller speedup, so a smaller fee."""
    arms = s["predicate"]["scenarios"]["latency"]["measurement"]["arms"]
    arms["luminal"]["blocks"] = [[int(t * 1.2) for t in b] for b in arms["luminal"]["blocks"]]


class FakeMachine:
    """The vendor's equivalent machine: the customer's arms again, other noise; it records
    the request it was given."""

    def __init__(self) -> None:
        self.requests: list[BenchRequest] = []

    def __call__(self, req: BenchRequest) -> BenchRun:
        self.requests.append(req)
        return fake_run(honest(2.0, 0.02, seed=7), sigma=0.02, method=req.method, baseline_seed=8)


@pytest.fixture
def measured(customer: Customer, tmp_path: Path) -> tuple[Path, Path, Path]:
    """(the customer's report, naming these artifact and model files, and the files)."""
    artifact, model = tmp_path / "model.lmnl", tmp_path / "model.onnx"
    artifact.write_bytes(b"the artifact measured")
    model.write_bytes(b"the baseline model measured")

    def name_files(s: dict[str, Any]) -> None:
        p = s["predicate"]
        p["candidate"]["artifact_digests"][0]["sha256"] = s["subject"][0]["digest"]["sha256"] = (
            hashlib.sha256(artifact.read_bytes()).hexdigest()
        )
        p["baseline"]["model_sha256"] = s["subject"][1]["digest"]["sha256"] = hashlib.sha256(
            model.read_bytes()
        ).hexdigest()

    return forge(customer.report, name_files, customer.identity), artifact, model


def _fake_audit(customer: Customer, report: Path, artifact: Path, model: Path):  # type: ignore[no-untyped-def]
    rc, out, err = vendor_cli(
        "audit", report, "--license", customer.license, "--artifact", artifact,
        "--model", model, "--json",
    )  # fmt: skip
    return rc, json.loads(out) if out.strip() else {}, err


def test_a_fresh_report_agrees_with_its_re_run(customer: Customer, measured, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    machine = FakeMachine()
    monkeypatch.setattr(audit_module, "run_bench", machine)
    report, artifact, model = measured
    rc, result, err = _fake_audit(customer, report, artifact, model)
    assert rc == 0 and result["agrees"] and result["finding"] == "within", (err, result)
    c, r = result["claimed"], result["reproduced"]
    assert r["lower"] <= c["point"] <= r["upper"] and c["point"] != r["point"]
    (req,) = machine.requests  # the bench the report records, on the vendor's copies
    assert req.target == artifact and req.model == model
    assert req.method.to_json() == FAST.to_json()  # the same settings, defaults resolved
    assert req.scenarios == ("latency",) and req.threads == 2 and req.trust_unsigned


def test_timings_rewritten_by_20_percent_are_outside_the_re_run(  # type: ignore[no-untyped-def]
    customer: Customer, measured, monkeypatch
) -> None:
    monkeypatch.setattr(audit_module, "run_bench", FakeMachine())
    report, artifact, model = measured
    forged = forge(report, _slower, customer.identity)
    rc, out, err = vendor_cli("verify-report", forged, "--license", customer.license)
    assert rc == 0 and "OK" in out, err  # signed by the bound install: consistent
    rc, result, err = _fake_audit(customer, forged, artifact, model)
    assert rc == 1 and "lies below the reproduced interval" in err, (err, result)
    assert result["finding"] == "below" and not result["agrees"]
    assert result["claimed"]["point"] < result["reproduced"]["lower"]
    faster = forge(report, lambda s: _slower(s) or _slower(s), customer.identity)
    assert _fake_audit(customer, faster, artifact, model)[0] == 1


def test_an_audit_needs_the_files_the_report_measured(customer: Customer, measured) -> None:  # type: ignore[no-untyped-def]
    report, artifact, _ = measured
    rc, _, err = vendor_cli(
        "audit", report, "--license", customer.license, "--artifact", artifact,
        "--model", artifact,
    )  # fmt: skip
    assert rc == 4 and "is not the baseline model" in err


#: Short blocks and a short settle pause: 30 rounds take about two seconds.
METHOD = MethodSettings(
    duration_s=0.3,
    min_runs=20,
    min_blocks=30,
    block_s=0.01,
    settle_s=0.01,
    warmup_max_s=0.5,
    audit_runs=20,
)


@pytest.fixture(scope="module")
def matmul(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """relu(x[64, 256] @ W): about 75 us a call, long enough that two runs' points agree
    within a few percent (a 3x8 Gemm's do not: its calls are all overhead)."""
    folder = tmp_path_factory.mktemp("audit-model")
    w = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "mm",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [64, 256])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 8
    model, artifact = folder / "mm.onnx", folder / "mm.lmnl"
    onnx.save(proto, model)
    compile_model(load_onnx(model), artifact, CompileOptions(budget_seconds=0.0))
    return artifact, model


@pytest.fixture(scope="module")
def bench_report(matmul: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `luminal bench mm.lmnl --model mm.onnx --scenario latency --threads 1` writes
    under the session's license (with METHOD's settings, which the CLI has no flags for)."""
    artifact, model = matmul
    out = tmp_path_factory.mktemp("audit") / "report.json"
    request = BenchRequest(
        target=artifact,
        model=model,
        scenarios=("latency",),
        threads=1,
        method=METHOD,
        terms=licensed_terms(),
        work_dir=out.parent,
    )
    sign_and_write(run_bench(request), out)
    return out


def _vendor_args(licensed_home: Path) -> tuple[str, ...]:
    """The session license is floating and signed by a locally trusted evaluation key: the
    vendor names the install (its activation record) and its own evaluation key."""
    identity = load_or_create(Home(licensed_home))
    return (
        "--license",
        str(licensed_home / "license.json"),
        "--install-key",
        encode_public(identity.public_key),
        "--trust-key",
        str(licensed_home.parent / "vendor" / "vendor.pub.json"),
    )


def _audit(report: Path, matmul, licensed_home: Path) -> tuple[int, dict[str, Any], str]:  # type: ignore[no-untyped-def]
    artifact, model = matmul
    rc, out, err = vendor_cli(
        "audit",
        report,
        "--artifact",
        artifact,
        "--model",
        model,
        *_vendor_args(licensed_home),
        "--json",
    )
    return rc, json.loads(out) if out.strip() else {}, err


@pytest.mark.slow
def test_on_this_machine_a_fresh_report_agrees(bench_report: Path, matmul, licensed_home) -> None:  # type: ignore[no-untyped-def]
    rc, result, err = _audit(bench_report, matmul, licensed_home)
    assert rc == 0, (err, result)
    assert result["agrees"] and result["finding"] == "within"
    c, r = result["claimed"], result["reproduced"]
    assert c["lower"] <= r["upper"] and r["lower"] <= c["upper"]


@pytest.mark.slow
def test_on_this_machine_rewritten_timings_are_found(  # type: ignore[no-untyped-def]
    bench_report: Path, matmul, licensed_home, tmp_path: Path
) -> None:
    identity = load_or_create(Home(licensed_home))
    forged = forge(bench_report, _slower, identity, tmp_path / "forged.json")
    rc, out, err = vendor_cli("verify-report", forged, *_vendor_args(licensed_home))
    assert rc == 0 and "OK" in out, err  # signed by the bound install: consistent
    rc, result, err = _audit(forged, matmul, licensed_home)
    assert rc == 1 and "below the reproduced interval" in err, (err, result)
    assert result["finding"] == "below" and not result["agrees"]
    assert result["claimed"]["upper"] < result["reproduced"]["lower"]
