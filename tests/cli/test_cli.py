"""The CLI end to end: exit codes, JSON, files written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort

from luminal._version import __version__


def test_version(cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = cli("--version")
    assert rc == 0 and out.strip() == f"luminal {__version__}"


def test_help_lists_commands_with_examples(cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = cli("--help")
    assert rc == 0
    for command in ("inspect", "run", "devices"):
        assert command in out
    rc, out, _ = cli("run", "--help")
    assert rc == 0 and "Examples" in out and "--compare" in out


def test_help_has_exit_codes_and_no_type_noise(cli) -> None:  # type: ignore[no-untyped-def]
    from luminal.errors import EXIT_CODES

    for args in (("--help",), ("run", "--help"), ("tune-db", "clear", "--help")):
        rc, out, _ = cli(*args)
        assert rc == 0 and "Exit codes:" in out
        assert "<bool>" not in out and "{model}" not in out, args
        text = " ".join(out.split())
        assert all(f"{code} " in text for code, _ in EXIT_CODES)
    rc, out, _ = cli("run", "--help")
    assert "luminal run [OPTIONS] MODEL" in out and "<path>" in out  # argument types stay


def test_inspect_json(cli, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    path, _ = suite_onnx("mlp")
    rc, out, err = cli("inspect", path, "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["format"] == "onnx" and data["opset"] == 18
    assert data["inputs"] == [{"name": "x", "shape": [8, 512], "dtype": "f32"}]
    assert data["outputs"][0]["shape"] == [8, 512]
    assert data["source_ops"] == {"Gemm": 3, "Relu": 2}
    assert data["parameters"] == 3 * (512 * 512 + 512)
    # 3 matmuls of 8x512x512: 2*M*N*K less M*N for the first add of each sum, plus bias and relu.
    matmul = 3 * (2 * 8 * 512 * 512 - 8 * 512)
    assert data["ir"]["flops"] == matmul + 3 * 8 * 512 + 2 * 8 * 512


def test_inspect_table(cli, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    path, _ = suite_onnx("cnn")
    rc, out, err = cli("inspect", path)
    assert rc == 0, err
    for fragment in ("Conv", "BatchNormalization", "parameters", "FLOPs", "1x3x224x224"):
        assert fragment in out


def test_run_compare_writes_outputs(cli, suite_onnx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx("mlp")
    np.save(tmp_path / "x.npy", feeds["x"])
    out_dir = tmp_path / "outs"
    rc, out, err = cli(
        "run",
        path,
        "--input",
        f"x={tmp_path / 'x.npy'}",
        "--reference",
        "--compare",
        "onnxruntime",
        "-o",
        out_dir,
    )
    assert rc == 0, err
    assert "parity vs onnxruntime: OK" in out
    want = ort.InferenceSession(str(path)).run(None, feeds)[0]
    np.testing.assert_allclose(np.load(out_dir / "y.npy"), want, rtol=1e-4, atol=1e-5)
    assert not list(out_dir.glob(".tmp-*"))


def test_run_json_with_npz(cli, suite_onnx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx("mlp")
    np.savez(tmp_path / "in.npz", **feeds)
    rc, out, err = cli(
        "run", path, "--input", tmp_path / "in.npz", "--compare", "onnxruntime", "--json"
    )
    assert rc == 0, err
    data = json.loads(out)
    assert data["parity"]["ok"] is True and data["parity"]["oracle"] == "onnxruntime"
    assert data["outputs"]["y"]["shape"] == [8, 512]
    assert data["inputs"]["seeded"] is False


def test_run_mismatch_exits_5(cli, suite_onnx) -> None:  # type: ignore[no-untyped-def]
    path, _ = suite_onnx("mlp")
    # An impossible tolerance: any rounding difference at all fails parity.
    rc, out, err = cli(
        "run", path, "--compare", "onnxruntime", "--rtol", "0", "--atol", "0", "--seed", "3"
    )
    assert rc == 5, (out, err)
    assert "MISMATCH" in out and err.startswith("error: outputs ['y'] disagree with onnxruntime")


def test_run_input_errors(cli, suite_onnx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _ = suite_onnx("mlp")
    np.save(tmp_path / "wrong.npy", np.zeros((3, 3), np.float32))
    cases = [
        (["--input", "x"], "expected NAME=FILE.npy"),
        (["--input", f"nope={tmp_path / 'wrong.npy'}"], "no input 'nope'"),
        (["--input", f"x={tmp_path / 'missing.npy'}"], "no such input file"),
        (["--input", f"x={tmp_path / 'wrong.npy'}"], "has shape (3, 3), the model wants (8, 512)"),
        (["--compare", "tvm"], "unknown oracle 'tvm'"),
        (["--dim", "batch"], "expected NAME=N"),
    ]
    for args, message in cases:
        rc, out, err = cli("run", path, *args)
        assert rc == 2, (args, out, err)
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_bad_npy_file(cli, suite_onnx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _ = suite_onnx("mlp")
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    rc, _, err = cli("run", path, "--input", f"x={tmp_path / 'bad.npy'}")
    assert rc == 2 and "not a readable .npy" in err


def test_devices(cli) -> None:  # type: ignore[no-untyped-def]
    rc, out, err = cli("devices", "--json")
    assert rc == 0, err
    (cpu,) = json.loads(out)["devices"]
    assert cpu["kind"] == "cpu" and cpu["logical_cores"] >= 1 and len(cpu["fingerprint"]) == 16
    rc, out, _ = cli("devices")
    assert rc == 0 and "cpu" in out


def test_verbose_shows_traceback(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x0c garbage")
    rc, _, err = cli("-v", "inspect", bad)
    assert rc == 6 and "Traceback" in err
