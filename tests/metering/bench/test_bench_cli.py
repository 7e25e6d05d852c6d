"""`luminal bench` end to end on tiny real models: ONNX Runtime vs the compiled artifact."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from luminal.metering.report import read

# Short, on a shared 2-core machine: the timed phase is capped at 1 s, so the speedup
# interval may stay wider than the target; these tests accept exactly that failure and
# nothing else (the fake-clock tests pin the method itself).
QUICK = (
    *("--duration", "0.3", "--max-duration", "1", "--min-runs", "20", "--min-blocks", "5"),
    *("--block-ms", "3"),
)
#: Checks the shared machine's noise may fail on this model, whose run takes microseconds:
#: the intervals, and TEST04 (fresh against repeated inputs), where copying in a fresh
#: input is itself a measurable share of the run (1.14x once in a clean-clone CI run; the
#: audit's own verdicts are tested in test_validity.py, a caching model among them).
NOISE = {"latency.interval", "throughput.interval", "test04"}


WIDTH = 16


def _mlp(path: Path, seed: int) -> Path:
    """x[N, WIDTH] -> relu(x @ W + b): the batch dim N is symbolic."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(WIDTH).astype(np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["z"]),
        helper.make_node("Relu", ["z"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", WIDTH])],
        initializer=[w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bench-models")
    return {"a": _mlp(folder / "a.onnx", 0), "b": _mlp(folder / "b.onnx", 1)}


def _bench(*args: object) -> tuple[int, str, str]:
    """`luminal bench` in a process of its own, as a customer runs it: late in a full test
    session the in-process runs took TEST04 (fresh vs repeated inputs) past its 1.10x
    bound, 1.13-1.16x, where a fresh process measures 1.01-1.03x."""
    done = subprocess.run(
        [sys.executable, "-m", "luminal", "bench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout, done.stderr


def _failed(report: Path) -> set[str]:
    _, statement = read(report)
    checks = statement["predicate"]["results"]["validity"]["checks"]
    return {c["name"] for c in checks if not c["ok"]}


def test_compile_first_bench_with_both_scenarios(cli, models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "report.json"
    rc, stdout, err = _bench(
        models["a"], "--compile-first", "--dim", "N=2", "--batch", "8", "-o", out, *QUICK
    )
    assert rc in (0, 5), err
    assert _failed(out) <= NOISE, err
    assert (rc == 0) == (not _failed(out))
    assert "latency (batch 2)" in stdout and "throughput (batch 8)" in stdout
    # not a terminal: one line per finished phase, as `luminal compile` prints them
    for line in ("✓ compile a.lmnl", "✓ parity (latency): 8 input sets", "✓ audit TEST04"):
        assert line in err
    assert re.search(r"✓ timed \(throughput\): \d+ blocks, speedup interval ±[\d.]+%", err)
    if rc == 5:  # INVALID: why and what to do, no speedup
        assert "INVALID: why" in stdout and "To fix:" in stdout and "speedup 1." not in stdout
    assert (tmp_path / "a.lmnl").is_file() and (tmp_path / "a.b8.lmnl").is_file()
    _, statement = read(out)
    p = statement["predicate"]
    names = [s["name"] for s in statement["subject"]]
    assert names == ["artifact:a.lmnl", "artifact:a.b8.lmnl", "baseline-model:a.onnx", "inputs"]
    assert p["baseline"]["info"]["providers"] == ["CPUExecutionProvider"]
    assert p["baseline"]["info"]["intra_op_num_threads"] == p["conditions"]["threads"]
    assert p["conditions"]["OMP_NUM_THREADS"] == str(p["conditions"]["threads"])
    assert p["conditions"]["omp_max_threads"] in (None, p["conditions"]["threads"])
    assert p["inputs"]["source"] == "seeded" and p["inputs"]["sets"] == 8
    lat = p["scenarios"]["latency"]["measurement"]
    assert len(lat["order"]) >= 5 and lat["elapsed_ns"] >= 0.3e9
    assert p["audit"]["test04"]["runs"] == 100 and p["audit"]["test01"]["samples"]
    # the license's price book has cpu at 0.10 USD/h, share 1/3
    assert p["pricing"]["price_per_hour"] == "0.10" and p["pricing"]["share"] == "1/3"
    assert p["pricing"]["terms"] == "evaluation"  # the session license: a local evaluation key
    rc, stdout, err = cli("report", "verify", out, "--file", tmp_path / "a.lmnl")
    assert rc == 0 and "OK" in stdout, err


def test_an_artifact_of_another_model_is_invalid(cli, models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    artifact = tmp_path / "a.lmnl"
    assert cli("compile", models["a"], "--dim", "N=2", "-o", artifact)[0] == 0
    out = tmp_path / "wrong.json"
    rc, _, err = cli(
        "bench", artifact, "--model", models["b"], "--scenario", "latency", "-o", out, *QUICK
    )
    assert rc == 5 and "INVALID" in err and "parity" in err
    assert {"parity", "test01"} <= _failed(out)
    _, statement = read(out)
    results = statement["predicate"]["results"]
    assert not results["savings"]["claimed"]
    assert cli("report", "verify", out)[0] == 0  # an INVALID report is still authentic


def test_inputs_from_a_file_and_their_digest(cli, models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    artifact = tmp_path / "a.lmnl"
    assert cli("compile", models["a"], "--dim", "N=2", "-o", artifact)[0] == 0
    x = np.random.default_rng(9).standard_normal((3, 2, WIDTH)).astype(np.float32)  # 3 sets
    np.savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "r.json"
    rc, _, err = _bench(
        artifact,
        "--inputs",
        tmp_path / "in.npz",
        "--scenario",
        "latency",
        "-o",
        out,
        *QUICK,
    )
    assert rc in (0, 5) and _failed(out) <= NOISE, err
    _, statement = read(out)
    inputs = statement["predicate"]["inputs"]
    assert inputs["source"] == "file" and inputs["sets"] == 3 and len(inputs["file_sha256"]) == 64
    assert cli("report", "verify", out, "--file", tmp_path / "in.npz")[0] == 0
    np.savez(tmp_path / "bad.npz", x=x[:, :, :8])
    rc, _, err = cli("bench", artifact, "--inputs", tmp_path / "bad.npz", "-o", out, *QUICK)
    assert rc == 2 and "shape" in err


def test_usage_errors_and_the_license(cli, models, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = cli("bench", models["a"], "-o", tmp_path / "r.json")
    assert rc == 2 and "--compile-first" in err
    rc, _, err = cli("bench", models["a"], "--baseline", "nope")
    assert rc == 2 and "onnxruntime" in err
    rc, _, err = cli("bench", models["a"], "--compile-first", "--baseline", "torch")
    assert rc == 2 and ".pt2" in err
    monkeypatch.setenv("LUMINAL_HOME", str(tmp_path / "empty-home"))
    rc, _, err = cli("bench", models["a"], "--compile-first", "--dim", "N=2")
    assert rc == 3 and "no license" in err


def test_help_lists_bench_and_report(cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = cli("--help")
    assert rc == 0 and "bench" in out and "report" in out
    rc, out, _ = cli("bench", "--help")
    assert rc == 0 and "--fail-below" in out and "Examples" in out
    rc, out, _ = cli("report", "--help")
    assert rc == 0 and "verify" in out and "show" in out
    assert json.loads(json.dumps({"ok": True}))
