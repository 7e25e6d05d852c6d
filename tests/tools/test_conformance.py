"""A representative subset of the ONNX conformance suite, through the harness in
`tools/conformance/` (the whole suite is `make conformance`)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.conformance import runner as conformance

ROOT = Path(__file__).parents[2]
EXPECTED = ROOT / "tests" / "conformance" / "expected_failures.toml"


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


@pytest.mark.slow  # heavy (10-25 s): make slow
@pytest.mark.conformance
def test_runs_as_a_module_from_the_repository_root(tmp_path: Path) -> None:
    """What `make conformance` runs, on one case: the table, the JSON and the exit status."""
    out = tmp_path / "conformance.json"
    args = ["--kinds", "node", "--filter", "^test_abs$", "--expected", str(EXPECTED)]
    proc = subprocess.run(
        [sys.executable, "-m", "tools.conformance", *args, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "node cases passed: 1 of 1" in proc.stdout
    data = json.loads(out.read_text())
    assert [(c["name"], c["status"]) for c in data["cases"]] == [("test_abs", "passed")]
