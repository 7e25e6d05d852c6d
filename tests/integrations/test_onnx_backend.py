"""The ONNX Backend API, and a representative subset of the ONNX conformance suite."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from luminal.compiler.integrations import conformance
from luminal.compiler.integrations import onnx_backend as backend
from luminal.errors import UnsupportedOp, UsageError
from tests.helpers.onnx_cases import node_model

EXPECTED = Path(__file__).parents[1] / "conformance" / "expected_failures.toml"


def _model(nodes, inputs, outputs, opset: int = 18, inits=()):  # type: ignore[no-untyped-def]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _f(name: str, shape):  # type: ignore[no-untyped-def]
    return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)


def test_prepare_and_run_positional_and_by_name() -> None:
    model = _model(
        [helper.make_node("Add", ["x", "y"], ["z"]), helper.make_node("Relu", ["z"], ["r"])],
        [_f("x", [2, 3]), _f("y", [3])],
        [_f("r", [2, 3])],
    )
    rep = backend.prepare(model, "CPU")
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    y = np.array([1, -1, 0.5], np.float32)
    (out,) = rep.run([x, y])
    np.testing.assert_array_equal(out, np.maximum(x + y, 0))
    named = rep.run({"x": x, "y": y})
    np.testing.assert_array_equal(named["r"], out)
    with pytest.raises(UsageError, match="dtype"):
        rep.run([x.astype(np.float64), y])


def test_run_node_and_run_model() -> None:
    node = helper.make_node("Mul", ["a", "b"], ["c"])
    a, b = np.full((2, 2), 3, np.float32), np.full((2, 2), 2, np.float32)
    (c,) = backend.run_node(node, [a, b])
    np.testing.assert_array_equal(c, a * b)
    model = _model([node], [_f("a", [2, 2]), _f("b", [2, 2])], [_f("c", [2, 2])])
    np.testing.assert_array_equal(backend.run_model(model, [a, b])[0], a * b)


def test_devices() -> None:
    assert backend.supports_device("CPU")
    assert not backend.supports_device("CUDA")
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_f("x", [2])], [_f("y", [2])])
    with pytest.raises(UsageError, match="CUDA"):
        backend.prepare(model, "CUDA")


def test_shape_inputs_are_specialized_once_per_value() -> None:
    """A Reshape whose target shape is fed at run time compiles once per distinct shape."""
    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [_f("x", [2, 6]), helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["rows", "cols"])],
    )
    rep = backend.prepare(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for shape in ([3, 4], [4, 3], [3, 4]):
        (y,) = rep.run([x, np.array(shape, np.int64)])
        np.testing.assert_array_equal(y, x.reshape(shape))
    assert rep.static == {"s"} and len(rep._sessions) == 2


def test_symbolic_dims_bind_to_the_fed_shape() -> None:
    x_info = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])
    model = _model([helper.make_node("Neg", ["x"], ["y"])], [x_info], [_f("y", ["batch", 4])])
    rep = backend.prepare(model)
    for n in (1, 3):
        x = np.ones((n, 4), np.float32)
        np.testing.assert_array_equal(rep.run([x])[0], -x)


def test_unsupported_op_fails_cleanly_at_prepare() -> None:
    model = node_model("NonZero", [np.ones((2, 3), np.float32)])
    with pytest.raises(UnsupportedOp, match="NonZero"):
        backend.prepare(model)


def test_sequence_inputs_are_refused_by_name() -> None:
    seq = helper.make_tensor_sequence_value_info("s", onnx.TensorProto.FLOAT, [2])
    model = _model(
        [helper.make_node("SequenceLength", ["s"], ["n"])],
        [seq],
        [helper.make_tensor_value_info("n", onnx.TensorProto.INT64, [])],
    )
    with pytest.raises(UnsupportedOp, match="sequence"):
        backend.prepare(model)


def test_old_opsets_are_upgraded_by_the_version_converter() -> None:
    w = numpy_helper.from_array(np.ones((3,), np.float32), "w")
    model = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [_f("x", [2, 3])], [_f("y", [2, 3])], 6, [w]
    )
    (y,) = backend.prepare(model).run([np.zeros((2, 3), np.float32)])
    np.testing.assert_array_equal(y, np.ones((2, 3), np.float32))


# ---- the conformance suite ------------------------------------------------------------------

#: node cases spanning the op families (elementwise, reductions, indexing, nn, attention,
#: control flow, functions, f16, quantization, recurrent, signal); they must all pass.
SUBSET_PASS = """
abs add add_bcast add_uint8 and_bcast4v4d argmax_keepdims_random argmin_no_keepdims_example
asin atan attention_3d attention_4d_causal attention_4d_gqa attention_4d_attn_mask_bool
averagepool_2d_pads averagepool_2d_ceil batchnorm_epsilon bitshift_left_uint16
bitwise_and_i32_2d cast_FLOAT_to_FLOAT16 castlike_FLOAT16_to_FLOAT ceil celu center_crop_pad_crop
clip clip_default_inbounds concat_3d_axis_negative_1 conv_with_strides_padding
convtranspose convtranspose_pads cumsum_2d_axis_1 cumsum_1d_reverse_exclusive depthtospace_example
dequantizelinear dft div_bcast einsum_batch_matmul elu erf expand_dim_changed flatten_axis2
floor gather_elements_negative_indices gather_1 gathernd_example_int32_batch_dim1 gelu_tanh_1
gemm_all_attributes globalaveragepool greater_equal_bcast gridsample_bilinear group_normalization_epsilon
gru_defaults hardmax_axis_1 hardswish identity instancenorm_example isinf isnan
layer_normalization_3d_axis1_epsilon leakyrelu less_equal_bcast logsoftmax_axis_1 lrn lstm_defaults
matmul_4d max_example maxpool_2d_pads maxpool_with_argmax_2d_precomputed_pads mish mod_mixed_sign_int32
mul_bcast neg nllloss_NCd1d2_with_weight_reduction_mean onehot_with_axis constant_pad reflect_pad pow
qlinearmatmul_2D_uint8_float32 quantizelinear range_float_type_positive_delta_expanded
reduce_l2_keep_dims_example reduce_log_sum_exp_do_not_keepdims_random reduce_max_empty_set
reduce_mean_default_axes_keepdims_random reduce_prod_do_not_keepdims_example reduce_sum_keepdims_random
relu reshape_negative_extended_dims resize_downsample_scales_linear resize_upsample_sizes_cubic
rms_normalization_3d_axis1_epsilon rnn_seq_length rotary_embedding round scatter_elements_with_reduction_max
scatternd_add sce_mean_weight selu shape_start_1 sigmoid sign sinh slice_neg_steps softmax_axis_1
softplus spacetodepth split_variable_parts_2d_opset18 sqrt squeeze stft sub_bcast sum_two_inputs
tanh tile top_k_negative_axis transpose_all_permutations_1 tril where_long_example xor_bcast4v4d
affine_grid_2d causal_conv_with_state_basic flexattention linear_attention_decode_step loop11
""".split()

#: cases outside luminal's element types or ops: they must fail with UnsupportedOp
SUBSET_UNSUPPORTED = """
cast_FLOAT_to_FLOAT8E4M3FN equal_string identity_sequence optional_has_element_empty_optional_input
nonzero_example unique_not_sorted_without_axis bernoulli
""".split()


@pytest.fixture(scope="module")
def suite():  # type: ignore[no-untyped-def]
    test = conformance.backend_test()
    cases = {c.name: c for c in conformance.collect(test, list(conformance.KINDS))}
    return test, cases


@pytest.mark.conformance
@pytest.mark.parametrize("name", SUBSET_PASS)
def test_conformance_subset_passes(suite, name: str) -> None:  # type: ignore[no-untyped-def]
    test, cases = suite
    status, message = conformance.run_one(test, cases[f"test_{name}"])
    assert status == "passed", message


@pytest.mark.conformance
@pytest.mark.parametrize("name", SUBSET_UNSUPPORTED)
def test_conformance_subset_fails_cleanly(suite, name: str) -> None:  # type: ignore[no-untyped-def]
    test, cases = suite
    status, message = conformance.run_one(test, cases[f"test_{name}"])
    assert status == "unsupported", message


def test_expected_failure_list_is_reasoned_and_matches_known_cases(suite) -> None:  # type: ignore[no-untyped-def]
    _, cases = suite
    entries = conformance.load_expected(EXPECTED)
    assert entries
    for entry in entries:
        assert len(entry.reason) > 30, entry.category
        for pattern in entry.patterns:
            assert any(pattern.fullmatch(n) for n in cases), (
                f"{entry.category}: {pattern.pattern} matches no case"
            )
    for name in SUBSET_PASS:
        hit = [e.category for e in entries if e.matches(f"test_{name}")]
        assert not hit, f"test_{name} is listed as expected to fail ({hit})"


def test_summary_counts_every_status() -> None:
    results = [
        conformance.Result("test_a", "node", "A", "passed", 0.1),
        conformance.Result("test_b", "node", "A", "unsupported", 0.1, expected="x"),
        conformance.Result("test_c", "node", "B", "wrong", 0.1),
    ]
    summary = conformance.summarize(results, [])
    assert summary["totals"]["total"] == 3 and summary["bad"] == ["test_c"]
    assert summary["by_op"]["A"]["passed"] == 1 and summary["by_op"]["B"]["wrong"] == 1
    assert re.search(r"node cases passed: 1 of 3", conformance.format_table(summary))
