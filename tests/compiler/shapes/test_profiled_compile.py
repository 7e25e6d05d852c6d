"""A shape profile end to end: one artifact, any size in range, equal to ONNX Runtime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import luminal
from luminal.compiler.artifact import read_artifact
from luminal.compiler.artifact.manifest import Manifest
from luminal.compiler.options import CompileOptions
from luminal.compiler.shapes.build import compile_profiled
from luminal.compiler.shapes.profile import parse_profile
from luminal.errors import IntegrityError, UnsupportedOp, UsageError


def _attention_model(path: Path, scale_by_length: bool = False) -> Path:
    """x (batch, seq, 8) -> softmax over seq of x @ W, its mean over seq, and x itself
    scaled by the sequence's length when asked (a model computing with a size)."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8], rng.standard_normal(64).tolist())
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Softmax", ["xw"], ["p"], axis=1),
        helper.make_node("Mul", ["p", "x"], ["px"]),
        helper.make_node("ReduceMean", ["px"], ["pooled"], keepdims=0, axes=[1]),
    ]
    outputs = [
        helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", "seq", 8]),
        helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", 8]),
    ]
    inits = [w]
    if scale_by_length:
        nodes += [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
            helper.make_node("Cast", ["length"], ["lengthf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["x", "lengthf"], ["scaled"]),
        ]
        inits.append(helper.make_tensor("one", TensorProto.INT64, [], [1]))
        outputs.append(
            helper.make_tensor_value_info("scaled", TensorProto.FLOAT, ["batch", "seq", 8])
        )
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
        outputs,
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory, _licensed_session: None):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("profile")
    model = _attention_model(tmp / "attention.onnx")
    profile = parse_profile(["batch=1..4:2", "seq=1..16:8"], ["batch=2,4", "seq=8,16"])
    assert profile is not None
    result = compile_profiled(model, tmp / "attention.lmnl", profile, {}, CompileOptions())
    return model, result


@pytest.mark.parametrize("batch, seq", [(1, 1), (1, 5), (2, 8), (3, 9), (4, 16), (2, 13)])
def test_every_size_in_range_matches_onnx_runtime(profiled, batch: int, seq: int) -> None:  # type: ignore[no-untyped-def]
    model, result = profiled
    session = luminal.load(result.path, meter=None)
    x = np.random.default_rng(batch * 100 + seq).standard_normal((batch, seq, 8))
    x = x.astype(np.float32)
    want = ort.InferenceSession(str(model)).run(None, {"x": x})
    got = session.run({"x": x})
    for name, value in zip(("p", "pooled"), want, strict=True):
        assert got[name].shape == value.shape
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5)


def test_the_artifact_records_its_profile_and_checked_padding(profiled) -> None:  # type: ignore[no-untyped-def]
    _, result = profiled
    art = read_artifact(result.path)
    spec = art.manifest.profile
    assert spec is not None
    assert [d.describe() for d in spec.profile.dims] == ["batch=1..4:2", "seq=1..16:8"]
    # the opt point first, unmasked for its own shape, then masked for what pads up to it
    first, second = spec.specializations[:2]
    assert (first.point, first.exact, first.padded) == ({"batch": 2, "seq": 8}, True, ())
    assert (second.point, second.exact, second.padded) == (first.point, False, ("batch", "seq"))
    assert len(spec.specializations) == 5
    # softmax's max and sum, and the mean, read through masks in every padded build
    assert [p.masks for p in result.points] == [0, 3, 3, 3, 3]
    assert result.checked_at == {"batch": 1, "seq": 1}
    session = luminal.load(result.path, meter=None)
    assert [(s.name, s.shape) for s in session.inputs] == [("x", (2, 8, 8))]  # no lengths


def test_sizes_outside_the_profile_or_a_wrong_fixed_dim_are_usage_errors(profiled) -> None:  # type: ignore[no-untyped-def]
    _, result = profiled
    session = luminal.load(result.path, meter=None)
    with pytest.raises(UsageError, match=r"dim 'seq' = 17 is outside .*seq=1..16:8"):
        session.run({"x": np.zeros((1, 17, 8), np.float32)})
    with pytest.raises(UsageError, match=r"input 'x' has shape \[1, 4, 7\]; expected batchxseqx8"):
        session.run({"x": np.zeros((1, 4, 7), np.float32)})


def test_a_hand_edited_profile_record_is_an_integrity_error(profiled) -> None:  # type: ignore[no-untyped-def]
    _, result = profiled
    data = read_artifact(result.path).manifest.to_json()
    for edit in (
        lambda p: p["specializations"].pop(),
        lambda p: p["dims"][0].update(buckets=[2]),
        lambda p: p["specializations"][1].update(member="model.so"),
        lambda p: p["specializations"][1].update(exact=True),
        lambda p: p["specializations"][0].update(exact="yes"),
        lambda p: p.update(axes={"x": {"0": "nope"}}),
        lambda p: p["specializations"][0]["outputs"].update(p=[[["seq", -1, 1]]]),
        lambda p: p["specializations"][1]["outputs"].update(p=[[["seq", 8, 0]], [], []]),
    ):
        bad = json.loads(json.dumps(data))
        edit(bad["profile"])
        with pytest.raises(IntegrityError, match="manifest field 'profile'"):
            Manifest.from_json(bad, "a.lmnl")


def test_a_model_computing_with_the_size_is_refused(tmp_path: Path) -> None:
    model = _attention_model(tmp_path / "scaled.onnx", scale_by_length=True)
    profile = parse_profile(["seq=1..8"], ["seq=4,8"])
    assert profile is not None
    with pytest.raises(UnsupportedOp, match=r"output 'scaled'.*computes with the size"):
        compile_profiled(model, tmp_path / "s.lmnl", profile, {"batch": 1}, CompileOptions())


def test_the_cli_compiles_a_profile_and_fixes_shapes(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = _attention_model(tmp_path / "m.onnx")
    out = tmp_path / "m.lmnl"
    args = ("--profile", "seq=1..8:8", "--buckets", "seq=4,8", "--dim", "batch=2")
    code, stdout, err = cli("compile", model, "-o", out, "--budget", "off", *args, "--json")
    assert code == 0, err
    report = json.loads(stdout)
    assert [p["point"] for p in report["points"]] == [{"seq": 8}, {"seq": 8}, {"seq": 4}]
    code, stdout, err = cli("compile", model, "-o", out, "--shapes", "x=2x3x8", "--json")
    assert code == 0, err
    assert [s.shape for s in luminal.load(out, meter=None).inputs] == [(2, 3, 8)]
    code, _, err = cli("compile", model, "-o", out, "--profile", "bogus=1..3", "--budget", "off")
    assert code == 2 and "no input of" in err and "batch, seq" in err
    code, _, err = cli("compile", model, "-o", out, "--shapes", "x=2x3", "--budget", "off")
    assert code == 2 and "x=2x3" in err


def test_inspect_describes_a_dynamic_model_at_size_one(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = _attention_model(tmp_path / "m.onnx")
    code, stdout, err = cli("inspect", model, "--json")
    assert code == 0, err
    assert "symbolic dims batch, seq taken as 1" in err
    assert json.loads(stdout)["inputs"][0]["shape"] == [1, 1, 8]
    code, stdout, _ = cli("inspect", model, "--dim", "batch=3", "--dim", "seq=5", "--json")
    assert code == 0 and json.loads(stdout)["inputs"][0]["shape"] == [3, 5, 8]


def test_a_profile_naming_a_member_it_lacks_is_refused_at_load(profiled) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from luminal.compiler.runtime.session import open_artifact

    _, result = profiled
    art = read_artifact(result.path)
    spec = art.manifest.profile
    assert spec is not None
    last = dataclasses.replace(spec.specializations[-1], member="profile.gone.lmnl")
    bad = dataclasses.replace(spec, specializations=(*spec.specializations[:-1], last))
    edited = dataclasses.replace(art, manifest=dataclasses.replace(art.manifest, profile=bad))
    with pytest.raises(IntegrityError, match=r"does not hold: \['profile.gone.lmnl'\]"):
        open_artifact(result.path, edited, meter=None)
