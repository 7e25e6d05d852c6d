"""`luminal profile`: --json is the documented schema, piped output is plain lines, and a
mistake is one line with its exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.compiler.test_profile import NODES, mlp


def test_json_profile_of_a_model(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = mlp(tmp_path / "mlp.onnx")
    code, out, _ = cli("profile", model, "--budget", "off", "--seconds", "0.05", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "luminal-profile/1"
    assert [k["name"] for k in doc["kernels"]] == ["k1", "k3"]
    assert all(k["nodes"] and set(k["nodes"]) <= set(NODES) for k in doc["kernels"])
    assert sum(k["share"] for k in doc["kernels"]) == pytest.approx(1.0)
    assert doc["unaccounted_ms"] == pytest.approx(doc["end_to_end_ms"] - doc["kernel_ms"])


def test_piped_artifact_profile_is_plain_lines(cli, gemm_artifact) -> None:  # type: ignore[no-untyped-def]
    out_path, _, _ = gemm_artifact
    code, out, _ = cli("profile", out_path, "--seconds", "0.05", "--top", "1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split("\t")[:3] == ["kernel", "kind", "onnx nodes"]
    assert len(lines[1].split("\t")) == 9 and "unaccounted" in lines[2]


def test_missing_model_is_one_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli("profile", tmp_path / "nope.onnx", "--budget", "off")
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: ")
    code, _, err = cli("profile", tmp_path / "nope.lmnl")
    assert code == 2 and "no such artifact" in err
