"""`benchmarks.matmul_vs_ort`: the ONNX product it builds against numpy, one small shape
compiled, checked against ONNX Runtime and timed (no speed asserted: a unit test times
nothing it could fail on), and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from benchmarks.matmul_vs_ort import SHAPES, Row, Shape, main, measure, onnx_model
from luminal.metering.bench.method import MethodSettings

SMALL = Shape("small", 8, 24, 40)


def test_the_model_is_x_at_w_plus_b(tmp_path: Path) -> None:
    path = onnx_model(SMALL, tmp_path / "m.onnx")
    init = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    assert init["w"].shape == (24, 40) and init["b"].shape == (40,)
    x = np.random.default_rng(5).standard_normal((8, 24)).astype(np.float32)
    (y,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(y, x @ init["w"] + init["b"], rtol=1e-5, atol=1e-5)


def test_a_shape_is_compiled_checked_and_timed(tmp_path: Path) -> None:
    settings = MethodSettings(duration_s=0.05, min_runs=1, min_blocks=2, block_s=0.002)
    row = measure(SMALL, tmp_path, 1, None, settings)
    assert row.parity_ok and row.max_abs < 1e-4
    assert row.ort_ms > 0 and row.luminal_ms > 0
    assert row.markdown().startswith("| small | 8x24 @ 24x40 |")


def test_the_ratio_is_luminal_over_ort() -> None:
    assert Row(SMALL, 2.0, 1.0, True, 0.0).ratio == 0.5


def test_the_shapes_are_the_suite_products() -> None:
    by = {s.name: s for s in SHAPES}
    assert (by["vit_fc2"].m, by["vit_fc2"].k, by["vit_fc2"].n) == (197, 1536, 384)
    assert by["bert_ffn1"].gflop == 2 * 128 * 768 * 3072 / 1e9


def test_an_unknown_shape_is_refused(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert main(["--shapes", "nope", "--json", str(tmp_path / "r.json")]) == 2
    assert "unknown shape" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_json_rows(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import benchmarks.matmul_vs_ort as mv

    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")  # main sets it; restored after the test
    monkeypatch.setattr(mv, "SHAPES", (SMALL,))
    monkeypatch.setattr(mv, "measure", lambda s, *_: Row(s, 2.0, 1.5, True, 1e-6))
    assert main(["--shapes", "small", "--threads", "1", "--json", str(tmp_path / "r.json")]) == 0
    out = json.loads((tmp_path / "r.json").read_text())
    assert out["threads"] == 1 and out["rows"][0]["ratio"] == 0.75
    assert out["rows"][0]["shape"]["name"] == "small"
