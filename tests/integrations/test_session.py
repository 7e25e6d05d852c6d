"""luminal.InferenceSession: ONNX Runtime's session API over compiled models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import luminal
from benchmarks.models import build
from luminal.compiler.frontend.onnx import load as load_onnx
from luminal.compiler.pipeline import compile_model
from luminal.errors import UsageError


def _ort(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", ["mlp", "encoder"])
def test_drop_in_for_onnxruntime(suite_onnx, name: str) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx(name)
    ours, theirs = luminal.InferenceSession(str(path)), _ort(path)
    for mine, ref in (
        (ours.get_inputs(), theirs.get_inputs()),
        (ours.get_outputs(), theirs.get_outputs()),
    ):
        assert [a.name for a in mine] == [a.name for a in ref]
        assert [a.type for a in mine] == [a.type for a in ref]
        assert [a.shape for a in mine] == [list(a.shape) for a in ref]
    got = ours.run(None, feeds)
    want = theirs.run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_run_selects_and_orders_outputs(suite_onnx) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx("mlp")
    sess = luminal.InferenceSession(path)
    name = sess.get_outputs()[0].name
    (only,) = sess.run([name], feeds)
    np.testing.assert_array_equal(only, sess.run(None, feeds)[0])
    with pytest.raises(UsageError, match="unknown output"):
        sess.run(["nope"], feeds)
    with pytest.raises(UsageError):
        sess.run(None, {})


def test_from_a_model_proto_and_bytes(suite_onnx) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx("mlp")
    proto = onnx.load(str(path))
    want = _ort(path).run(None, feeds)[0]
    for source in (proto, proto.SerializeToString()):
        got = luminal.InferenceSession(source).run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    meta = luminal.InferenceSession(proto).get_modelmeta()
    assert meta.producer_name == proto.producer_name and meta.graph_name == proto.graph.name


def test_from_an_artifact_and_a_cache_dir(suite_onnx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx("mlp")
    artifact = tmp_path / "mlp.lmnl"
    compile_model(load_onnx(path), artifact)
    from_artifact = luminal.InferenceSession(artifact).run(None, feeds)[0]
    cached = luminal.InferenceSession(path, cache_dir=tmp_path / "cache")
    assert (tmp_path / "cache" / "mlp.lmnl").is_file()
    np.testing.assert_array_equal(cached.run(None, feeds)[0], from_artifact)


def test_from_a_pt2_archive(tmp_path: Path) -> None:
    model = build("mlp")
    ep = torch.export.export(model.module, model.example_inputs)
    archive = tmp_path / "mlp.pt2"
    torch.export.save(ep, archive)
    sess = luminal.InferenceSession(archive)
    feed = {sess.get_inputs()[0].name: model.example_inputs[0].numpy()}
    with torch.no_grad():
        want = model.module(*model.example_inputs).numpy()
    np.testing.assert_allclose(sess.run(None, feed)[0], want, rtol=1e-4, atol=1e-5)


def test_symbolic_dims_are_bound_at_construction(tmp_path: Path) -> None:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 3])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    sess = luminal.InferenceSession(model, dims={"batch": 4})
    assert sess.get_inputs()[0].shape == [4, 3]
    data = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(sess.run(None, {"x": data})[0], np.maximum(data, 0))


def test_exported_from_the_package() -> None:
    assert "InferenceSession" in luminal.__all__
    assert luminal.InferenceSession.__module__ == "luminal.integrations.session"


def test_a_symbolic_model_serves_its_profile_like_onnx_runtime(tmp_path: Path) -> None:
    from tests.compiler.shapes.test_profiled_compile import _attention_model

    model = _attention_model(tmp_path / "attention.onnx")
    sess = luminal.InferenceSession(
        str(model), profile={"batch": (1, 2), "seq": (1, 8, 4)}, cache_dir=tmp_path / "cache"
    )
    assert [i.shape for i in sess.get_inputs()] == [["batch", "seq", 8]]
    assert sess.get_outputs()[1].shape == ["batch", 8]
    reference = ort.InferenceSession(str(model))
    for batch, seq in [(1, 1), (2, 3), (2, 8), (1, 6)]:
        x = np.random.default_rng(seq).standard_normal((batch, seq, 8)).astype(np.float32)
        for got, want in zip(sess.run(None, {"x": x}), reference.run(None, {"x": x}), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(UsageError, match="dim 'seq' = 9 is outside"):
        sess.run(None, {"x": np.zeros((1, 9, 8), np.float32)})
    assert (tmp_path / "cache" / "attention.lmnl").is_file()
