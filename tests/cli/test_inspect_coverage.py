"""`luminal inspect` on models with and without unsupported ops: the coverage table, JSON,
the summary line, `--strict`, and `run`/`compile` naming every unsupported op."""

from __future__ import annotations

import json
from pathlib import Path

import onnx

from tests.compiler.frontend.test_coverage import mixed_model, supported_model


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, path)
    return path


def test_inspect_lists_unsupported_ops_and_exits_0(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _save(mixed_model(), tmp_path / "mixed.onnx")
    rc, out, err = cli("inspect", path)
    assert rc == 0, err
    text = " ".join(out.split())
    for fragment in (
        "NonZero",
        "com.acme.Foo",
        "Resize",
        "unsupported",
        "not reached",
        "supported",
    ):
        assert fragment in text, fragment
    assert "4 of 6 op types unsupported: NonZero, Resize, Unique, com.acme.Foo" in text
    assert "not built (unsupported ops)" in text  # no IR, and no made-up FLOPs


def test_inspect_json_has_coverage_records(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _save(mixed_model(), tmp_path / "mixed.onnx")
    rc, out, err = cli("inspect", path, "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["ir"] is None
    cov = data["coverage"]
    assert cov["complete"] is False
    ops = {(o["domain"], o["op_type"]): o for o in cov["ops"]}
    assert ops[("", "NonZero")]["count"] == 2
    assert ops[("", "NonZero")]["status"] == "unsupported"
    assert ops[("", "NonZero")]["nodes"] == ["nz_a", "nz_b"]
    assert ops[("", "NonZero")]["findings"][0]["reason"] == "no lowering"
    assert ops[("com.acme", "Foo")]["findings"][0]["reason"] == "custom domain"
    assert ops[("com.acme", "Foo")]["opset"] == 1
    assert ops[("", "Resize")]["findings"][0]["reason"] == "values"
    assert ops[("", "Relu")]["status"] == "not reached"
    assert ops[("", "Add")] == {
        "domain": "",
        "op_type": "Add",
        "opset": 18,
        "count": 1,
        "status": "supported",
        "nodes": ["ok_add"],
        "reason": "",
        "findings": [],
    }


def test_inspect_strict_fails_with_the_unsupported_op_code(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _save(mixed_model(), tmp_path / "mixed.onnx")
    rc, out, err = cli("inspect", path, "--strict", "--json")
    assert rc == 6
    json.loads(out)  # the report is printed before the failure
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unsupported ops (4 kinds, 5 nodes)")


def test_compile_names_every_unsupported_op(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _save(mixed_model(), tmp_path / "mixed.onnx")
    out_dir = tmp_path / "out"
    rc, out, err = cli("compile", path, "-o", out_dir / "m.lmnl")
    assert rc == 6, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out + err
    for fragment in (
        "unsupported ops (4 kinds, 5 nodes)",
        "NonZero (nodes nz_a, nz_b: not supported)",
        "Unique (node uniq",
        "com.acme.Foo (node foo: custom domain 'com.acme' is not supported)",
        "Resize (node rs: ",
    ):
        assert fragment in lines[0], (fragment, lines[0])
    assert not out_dir.exists()


def test_inspect_of_a_supported_model_says_all_supported(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _save(supported_model(), tmp_path / "ok.onnx")
    rc, out, err = cli("inspect", path, "--strict")
    assert rc == 0, err
    assert "all 2 op types supported" in out and "FLOPs" in out
    rc, out, err = cli("inspect", path, "--json")
    data = json.loads(out)
    assert data["coverage"]["complete"] is True
    assert data["coverage"]["summary"] == "all 2 op types supported"
    assert data["ir"]["flops"] > 0
