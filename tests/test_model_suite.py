"""Tests of the public model suite (benchmarks/models.py) itself.

Every model must build deterministically, run with the documented shapes, export to one
self-contained ONNX file that passes the checker, and run in ONNX Runtime matching torch.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from benchmarks.models import SUITE_NAMES, SuiteModel, build, example_feeds, export_onnx, main

# name -> (input shapes, input dtypes, output shape)
EXPECTED: dict[str, tuple[list[tuple[int, ...]], list[torch.dtype], tuple[int, ...]]] = {
    "mlp": ([(8, 512)], [torch.float32], (8, 512)),
    "cnn": ([(1, 3, 224, 224)], [torch.float32], (1, 1000)),
    "encoder": ([(1, 128)], [torch.int64], (1, 128, 768)),
    "gpt": ([(1, 64)], [torch.int64], (1, 64, 1024)),
}

# ORT vs torch.  All four models pass the target tolerance (outputs are O(1)-O(10)).
RTOL, ATOL = 1e-4, 1e-5


@functools.cache
def _built(name: str) -> SuiteModel:
    return build(name)


@functools.cache
def _reference(name: str) -> np.ndarray:
    model = _built(name)
    with torch.no_grad():
        return model.module(*model.example_inputs).numpy()


def test_suite_names() -> None:
    assert SUITE_NAMES == ("mlp", "cnn", "encoder", "gpt")
    assert set(EXPECTED) == set(SUITE_NAMES)


def test_unknown_name_raises_key_error() -> None:
    with pytest.raises(KeyError, match=r"unknown suite model 'alexnet'.*mlp, cnn, encoder, gpt"):
        build("alexnet")


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_build_is_deterministic(name: str) -> None:
    first = _built(name)
    torch.manual_seed(1234)  # global RNG state must not matter ...
    torch.rand(17)
    state = torch.random.get_rng_state()
    second = build(name)
    assert torch.equal(torch.random.get_rng_state(), state)  # ... nor be disturbed by build()

    assert first.module is not second.module
    sd1, sd2 = first.module.state_dict(), second.module.state_dict()
    assert sd1.keys() == sd2.keys()
    for key in sd1:
        assert torch.equal(sd1[key], sd2[key]), key
    assert len(first.example_inputs) == len(second.example_inputs)
    for a, b in zip(first.example_inputs, second.example_inputs, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_model_metadata_and_forward_shape(name: str) -> None:
    model = _built(name)
    shapes, dtypes, out_shape = EXPECTED[name]
    assert model.name == name
    assert not model.module.training
    assert all(not m.training for m in model.module.modules())
    assert len(model.input_names) == len(model.example_inputs) == len(shapes)
    assert len(model.output_names) == 1
    for t, shape, dtype in zip(model.example_inputs, shapes, dtypes, strict=True):
        assert tuple(t.shape) == shape
        assert t.dtype == dtype

    ref = _reference(name)
    assert ref.shape == out_shape
    assert ref.dtype == np.float32
    assert np.isfinite(ref).all()
    # Random init must stay numerically sane: no vanishing or exploding activations.
    assert 0.1 < float(np.abs(ref).max()) < 100.0, float(np.abs(ref).max())


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_example_feeds(name: str) -> None:
    model = _built(name)
    feeds = example_feeds(model)
    assert list(feeds) == list(model.input_names)
    for arr, t in zip(feeds.values(), model.example_inputs, strict=True):
        assert isinstance(arr, np.ndarray)
        np.testing.assert_array_equal(arr, t.numpy())
    if name in ("encoder", "gpt"):
        ids = feeds["input_ids"]
        assert ids.min() >= 0 and ids.max() < 1024
        assert len(np.unique(ids)) > 10  # really random tokens, not a constant


def test_cnn_batchnorm_is_nontrivial() -> None:
    bns = [m for m in _built("cnn").module.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(bns) == 20
    for bn in bns:
        assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
        assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))
        assert not torch.allclose(bn.weight, torch.ones_like(bn.weight))
        assert not torch.allclose(bn.bias, torch.zeros_like(bn.bias))


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_export_onnx_matches_torch(name: str, tmp_path: Path) -> None:
    model = _built(name)
    path = export_onnx(model, tmp_path / f"{name}.onnx")
    assert path == tmp_path / f"{name}.onnx"
    # One self-contained file: no external data, no leftover temporary file.
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}.onnx"]

    proto = onnx.load(str(path), load_external_data=False)
    onnx.checker.check_model(proto, full_check=True)
    assert not any(
        init.data_location == onnx.TensorProto.EXTERNAL for init in proto.graph.initializer
    )
    assert {op.domain for op in proto.opset_import} <= {"", "ai.onnx"}
    assert max(op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")) == 18
    assert [i.name for i in proto.graph.input] == list(model.input_names)
    assert [o.name for o in proto.graph.output] == list(model.output_names)
    assert {n.domain for n in proto.graph.node} <= {"", "ai.onnx"}

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    (got,) = session.run(list(model.output_names), example_feeds(model))
    np.testing.assert_allclose(got, _reference(name), rtol=RTOL, atol=ATOL)


def test_exported_graph_uses_plain_ops(tmp_path: Path) -> None:
    """BN stays a BatchNormalization node; attention is plain MatMul/Softmax, not fused."""
    cnn = onnx.load(str(export_onnx(_built("cnn"), tmp_path / "cnn.onnx")))
    cnn_ops = [n.op_type for n in cnn.graph.node]
    assert cnn_ops.count("BatchNormalization") == 20
    assert cnn_ops.count("Conv") == 20
    gpt = onnx.load(str(export_onnx(_built("gpt"), tmp_path / "gpt.onnx")))
    gpt_ops = {n.op_type for n in gpt.graph.node}
    assert {"MatMul", "Softmax", "Where", "LayerNormalization", "Tanh"} <= gpt_ops
    assert "Attention" not in gpt_ops


def test_export_opset_17(tmp_path: Path) -> None:
    path = export_onnx(_built("mlp"), tmp_path / "sub" / "mlp17.onnx", opset=17)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    assert [op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")] == [17]


def test_cli_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    names = capsys.readouterr().out.split()
    assert names[: len(SUITE_NAMES)] == list(SUITE_NAMES)  # then the public suite
    assert "resnet50" in names and "bert@8" in names


def test_cli_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mlp.onnx"
    assert main(["--export", "mlp", "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    onnx.checker.check_model(onnx.load(str(out)))


def test_cli_rejects_unknown_model(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--export", "nope"])
    assert exc.value.code == 2
    assert "unknown suite model 'nope'" in capsys.readouterr().err
