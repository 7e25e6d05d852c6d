"""A float MOD by 2 (the evenness test of every round-half-to-even requantize) is written
inline instead of as a libm call (`cexpr._mod`): it must equal fmod bit for bit, the sign
of a zero result, infinities and NaN included."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from luminal.compiler.frontend.onnx import load
from luminal.compiler.ir import interpreter
from tests.helpers.compiled import compile_and_run


def test_mod_by_two_equals_fmod_bit_for_bit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(5)
    special = [0, -0.0, 2, -2, 3, -3, 1.5, -1.5, 2.5, -2.5, np.inf, -np.inf, np.nan]
    special += [1e-45, -1e-45, 3e-45, 16777216, 16777217, -8388609.0, 0.5, -0.5, 3.4e38]
    x = np.concatenate(
        [
            rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32).view(np.float32),
            np.array(special, np.float32),
            np.arange(-64, 64, 0.25, dtype=np.float32),
        ]
    )
    node = helper.make_node("Mod", ["x", "two"], ["y"], fmod=1)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x.size])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    loaded = load(path)
    got = compile_and_run(loaded.graph, {"x": x}, tmp_path)["y"]
    with np.errstate(invalid="ignore"):
        want = np.fmod(x, np.float32(2))
    assert np.array_equal(interpreter.run(loaded.graph, {"x": x})["y"], want, equal_nan=True)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), x[~same][:8]
