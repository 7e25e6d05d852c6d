"""The broad public suite (`benchmarks.public_models`): names and batches, deterministic
random weights whose activations stay O(1), and exports that ONNX Runtime runs with the
outputs of the torch module.  Compiling every member is the benchmark's job
(`python -m benchmarks.compare --models public`); one small member is compiled here, slow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from benchmarks import public_models
from benchmarks.models import build, example_feeds, export_onnx


def test_names_and_batches() -> None:
    assert public_models.split("resnet50@8") == ("resnet50", 8)
    assert public_models.split("bert") == ("bert", 1)
    names = public_models.suite()
    assert len(names) == 2 * len(public_models.PUBLIC_NAMES)
    assert "convnext_tiny@8" in names and "whisper" in names
    with pytest.raises(KeyError, match="unknown suite model"):
        public_models.split("alexnet")
    with pytest.raises(KeyError, match="integer"):
        public_models.split("bert@x")


def _ort(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "distilbert@2"])
def test_export_runs_in_onnxruntime_like_torch(name: str, tmp_path: Path) -> None:
    model = build(name)
    again = build(name)
    for p, q in zip(model.module.parameters(), again.module.parameters(), strict=True):
        assert torch.equal(p, q)  # fixed seeds: the same weights on every build
    with torch.inference_mode():
        want = model.module(*model.example_inputs).numpy()
    assert np.abs(want).max() > 1e-2  # calibrated: not the 1e-15 outputs of a raw random CNN
    got = _ort(export_onnx(model, tmp_path / "m.onnx"), example_feeds(model))
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_a_public_member_compiles_and_matches_onnxruntime(tmp_path: Path) -> None:
    import luminal
    from benchmarks.licensed import licensed
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.pipeline import CompileOptions, compile_model

    model = build("mobilenet_v3_small")
    path = export_onnx(model, tmp_path / "m.onnx")
    feeds = example_feeds(model)
    with licensed():
        result = compile_model(load(path), tmp_path / "m.lmnl", CompileOptions())
        got = luminal.load(result.path).run(feeds)
    np.testing.assert_allclose(next(iter(got.values())), _ort(path, feeds), rtol=1e-3, atol=1e-4)


def test_what_native_code_prints_while_exporting_goes_to_stderr(capfd) -> None:  # type: ignore[no-untyped-def]
    """The TorchScript exporter's native log (the whole Torch IR graph when it gives up on
    GPT-2) must not land in the middle of a benchmark's table on stdout."""
    import os

    from benchmarks.models import _quiet

    with _quiet():
        os.write(1, b"native log\n")
        print("python print")
    os.write(1, b"table\n")
    out, err = capfd.readouterr()
    assert out == "table\n"
    assert "native log" in err and "python print" not in out
