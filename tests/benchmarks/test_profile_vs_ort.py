"""benchmarks.profile_vs_ort: ORT's per-node profile charged to the luminal kernel that
computes each node, on a model built here (a Conv + BN + ReLU, then a Gemm)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from benchmarks.profile_vs_ort import OrtNode, match, onnx_name, ort_profile, producers, report
from luminal.compiler.frontend.onnx import load
from luminal.compiler.options import CompileOptions
from luminal.compiler.profile import KernelProfile, profile_model


def conv_net(path: Path) -> Path:
    rng = np.random.default_rng(0)
    init = {
        "w": rng.standard_normal((8, 3, 3, 3)),
        "scale": rng.uniform(0.5, 2, 8),
        "bias": rng.standard_normal(8),
        "mean": rng.standard_normal(8),
        "var": rng.uniform(0.5, 2, 8),
        "shape": np.array([1, -1]),
        "fc": rng.standard_normal((8 * 16 * 16, 10)),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"], name="bn"
        ),
        helper.make_node("Relu", ["b"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "fc"], ["y"], name="fc"),
    ]
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [
            numpy_helper.from_array(v.astype(np.int64 if k == "shape" else np.float32), k)
            for k, v in init.items()
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_ort_names_map_back_to_onnx_nodes() -> None:
    made = {"/a/bn/BatchNormalization_output_0": "/a/bn/BatchNormalization", "r": "relu"}
    assert onnx_name("/a/bn/BatchNormalization_output_0_nchwc", made) == "/a/bn/BatchNormalization"
    assert onnx_name("r_nchwc", made) == "relu"
    assert onnx_name("/a/act/Mul/QuickGeluFusion/", made) == "/a/act/Mul"
    assert onnx_name("conv", made) == "conv"


def test_every_ort_node_is_charged_to_the_kernel_computing_it(tmp_path: Path) -> None:
    path = conv_net(tmp_path / "net.onnx")
    p = profile_model(load(path), CompileOptions(), seconds=0.05, threads=1)
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    ort = ort_profile(path, {"x": x}, threads=1, runs=3, tensors=producers(path))
    assert ort and all(n.us >= 0 for n in ort)
    m = match(p.kernels, ort, producers(path))
    assert [r.kernel for r in m.rows] == [k.name for k in p.kernels]
    charged = sum(r.ort_us for r in m.rows) + sum(m.unmatched.values())
    assert charged == sum(n.us for n in ort)  # nothing dropped, nothing counted twice
    conv_row = next(r for r in m.rows if "conv" in r.nodes and r.kind == "contraction")
    assert conv_row.ort_us > 0  # ORT's fused Conv(+BN+ReLU) lands on luminal's conv kernel
    text = report("net", 1, m, top=5)
    assert text.startswith("## net, 1 thread(s)") and conv_row.kernel in text


def test_unknown_nodes_are_listed_by_op() -> None:
    m = match([], [OrtNode("ReorderInput_1", "ReorderInput", 5.0)], {})
    assert m.rows == () and m.unmatched == {"ReorderInput": 5.0}


def test_a_fused_node_writing_its_own_tensor_is_charged_downstream(tmp_path: Path) -> None:
    """ORT's MatMul + Add fusion writes a 2-D Gemm result of its own, reshaped after it:
    the tensor the reshape writes (the source model's Add output) names the kernel."""
    from benchmarks.profile_vs_ort import _writes

    nodes = [
        helper.make_node("Gemm", ["a", "w", "b"], ["gemm_out"], name="Gemm_token_1"),
        helper.make_node("Reshape", ["gemm_out", "s"], ["add_out"], name="gemm_output_reshape"),
    ]
    graph = helper.make_graph(
        nodes,
        "opt",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("add_out", TensorProto.FLOAT, [1, 4, 8])],
    )
    path = tmp_path / "optimized.onnx"
    onnx.save(helper.make_model(graph), path)
    writes = _writes(path, {"add_out": "ffn/Add"})
    assert writes == {"Gemm_token_1": ("add_out",), "gemm_output_reshape": ("add_out",)}
    kernel = KernelProfile(
        "k1", "contraction", ("ffn/MatMul", "ffn/Add"), "generated", (1, 4, 8), 1e-5, 1.0, 0, 0, 1.0
    )
    gemm = OrtNode("Gemm_token_1", "Gemm", 7.0, writes["Gemm_token_1"])
    m = match([kernel], [gemm], {"add_out": "ffn/Add"})
    assert m.rows[0].ort_us == 7.0 and not m.unmatched
