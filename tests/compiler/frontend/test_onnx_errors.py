"""Bad model files: one clear line, the documented exit code, no traceback, nothing written."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tests.helpers.onnx_cases import node_model


def _assert_clean_failure(cli, args, code: int, *fragments: str) -> str:  # type: ignore[no-untyped-def]
    rc, out, err = cli(*args)
    assert rc == code, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in out + err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture
def good_model(tmp_path: Path) -> Path:
    w = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    model = node_model("MatMul", [np.zeros((2, 16), np.float32), w], consts=(1,))
    path = tmp_path / "good.onnx"
    onnx.save(model, path)
    return path


def test_truncated_file(cli, good_model: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "truncated.onnx"
    data = good_model.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    out_dir = tmp_path / "out"
    _assert_clean_failure(cli, ["run", bad, "-o", out_dir], 6, str(bad), "truncated or corrupt")
    assert not out_dir.exists()


def test_empty_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "empty.onnx"
    bad.write_bytes(b"")
    _assert_clean_failure(cli, ["inspect", bad], 6, "empty")


def test_bit_flip_in_structure(cli, good_model: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = bytearray(good_model.read_bytes())
    data[0] ^= 0x04  # the first field tag now claims wire type 4 (end-group): unparseable
    bad = tmp_path / "flipped.onnx"
    bad.write_bytes(bytes(data))
    _assert_clean_failure(cli, ["inspect", bad], 6, str(bad))


def test_bit_flips_never_crash(cli, good_model: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Flip one bit at many positions of the model's structure: every outcome is either a
    clean load or a one-line error with a documented code, never a traceback."""
    data = good_model.read_bytes()
    header = len(data) - 16 * 16 * 4  # skip the raw weight bytes, which carry no structure
    codes = set()
    for pos in range(0, max(header, 1), max(header // 30, 1)):
        for bit in (0, 3, 6):
            flipped = bytearray(data)
            flipped[pos] ^= 1 << bit
            bad = tmp_path / f"flip{pos}_{bit}.onnx"
            bad.write_bytes(bytes(flipped))
            rc, out, err = cli("inspect", bad, "--json")
            assert rc in (0, 2, 6), (pos, bit, rc, err)
            assert "Traceback" not in out + err
            if rc:
                assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
            codes.add(rc)
    assert 6 in codes  # the sweep did reach corrupting flips


def test_unsupported_op_names_op_node_and_opset(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = node_model("NonZero", [np.zeros((2, 5), np.float32)])
    path = tmp_path / "nonzero.onnx"
    onnx.save(model, path)
    _assert_clean_failure(
        cli, ["run", path], 6, "NonZero", "nonzero_node", "opset 18", "not supported"
    )
    # inspect describes the model (exit 0) and says what is missing; --strict fails on it
    rc, out, err = cli("inspect", path)
    assert rc == 0, err
    assert "NonZero" in out and "1 of 1 op types unsupported: NonZero" in out
    _assert_clean_failure(cli, ["inspect", path, "--strict"], 6, "NonZero", "nonzero_node")


def test_unsupported_attribute_value(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = node_model(
        "Resize",
        [np.zeros((1, 1, 2, 2), np.float32), None, np.array([1, 1, 2, 2], np.float32)],
        {"coordinate_transformation_mode": "tf_half_pixel_for_nn"},
        consts=(2,),
    )
    path = tmp_path / "resize.onnx"
    onnx.save(model, path)
    _assert_clean_failure(cli, ["run", path], 6, "Resize", "resize_node", "tf_half_pixel_for_nn")


def _external_model(tmp_path: Path, location: str) -> Path:
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "64")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    folder = tmp_path / "models" / "a"
    folder.mkdir(parents=True)
    path = folder / "ext.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_external_data_escaping_the_folder(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _external_model(tmp_path, "../../etc/passwd")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_bytes(b"\0" * 64)  # exists, yet must not be read
    _assert_clean_failure(
        cli, ["inspect", path], 6, "'w'", "../../etc/passwd", "outside the model's folder"
    )


def test_external_data_absolute_path(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _external_model(tmp_path, "/etc/passwd")
    _assert_clean_failure(cli, ["inspect", path], 6, "/etc/passwd", "relative")


def test_external_data_missing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _external_model(tmp_path, "weights.bin")
    _assert_clean_failure(cli, ["inspect", path], 6, "weights.bin", "does not exist")


def test_external_data_that_is_valid_loads(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _external_model(tmp_path, "weights.bin")
    (path.parent / "weights.bin").write_bytes(np.full((4, 4), 2.0, np.float32).tobytes())
    x = np.ones((2, 4), np.float32)
    np.save(tmp_path / "x.npy", x)
    out_dir = tmp_path / "out"
    rc, _out, err = cli(
        "run", path, "--input", f"x={tmp_path / 'x.npy'}", "-o", out_dir, "--compare", "onnxruntime"
    )
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(out_dir / "y.npy"), x @ np.full((4, 4), 2.0, np.float32))


def test_external_data_short_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _external_model(tmp_path, "weights.bin")
    (path.parent / "weights.bin").write_bytes(b"\0" * 10)
    _assert_clean_failure(cli, ["inspect", path], 6, "past the end")


class _Payload:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (Path("/tmp/luminal-pwned"),))


@pytest.mark.parametrize("suffix", [".pt", ".pth", ".bin", ".ckpt"])
def test_pickled_torch_file_is_refused_unopened(cli, tmp_path: Path, suffix: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / f"model{suffix}"
    path.write_bytes(pickle.dumps(_Payload()))
    Path("/tmp/luminal-pwned").unlink(missing_ok=True)
    _assert_clean_failure(cli, ["inspect", path], 6, "refusing to unpickle", "torch.export.save")
    assert not Path("/tmp/luminal-pwned").exists()


def test_pickle_renamed_to_onnx(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "model.onnx"
    path.write_bytes(pickle.dumps(_Payload()))
    _assert_clean_failure(cli, ["inspect", path], 6, "not a valid ONNX file")
    assert not Path("/tmp/luminal-pwned").exists()


def test_missing_file_is_a_usage_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _assert_clean_failure(cli, ["inspect", tmp_path / "nope.onnx"], 2, "no such model file")


def test_unknown_suffix(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "model.tflite"
    path.write_bytes(b"TFL3")
    _assert_clean_failure(cli, ["inspect", path], 6, "unknown model type")


def test_symbolic_dim_must_be_bound(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    path = tmp_path / "sym.onnx"
    onnx.save(model, path)
    out_path = tmp_path / "sym.lmnl"
    compile_args = ["compile", path, "-o", out_path, "--budget", "off"]
    _assert_clean_failure(cli, compile_args, 2, "'batch'", "--dim batch=N", "--profile batch=")
    rc, out, err = cli("inspect", path)  # described at size 1, saying so
    assert rc == 0 and "symbolic dims batch taken as 1" in err, err
    rc, out, err = cli("run", path, "--dim", "batch=3", "--compare", "onnxruntime", "--json")
    assert rc == 0, err
    assert '"shape": [\n        3,\n        4\n      ]' in out


def test_checker_failure(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    node = helper.make_node("Relu", ["undefined_tensor"], ["y"])
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 18)]
    )
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    _assert_clean_failure(cli, ["inspect", path], 6, "ONNX checker")
