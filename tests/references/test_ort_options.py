"""`--baseline-options FILE.json` for ONNX Runtime: the customer's SessionOptions, applied
(read back from the session) or refused with one line naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from luminal.errors import UsageError
from luminal.references.baselines import BaselineOptions, open_baseline, read_options_file
from luminal.references.baselines.onnx_runtime import session_options

X = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)


def _file(tmp_path: Path, fields: object) -> Path:
    path = tmp_path / "ort.json"
    path.write_text(json.dumps(fields))
    return path


def test_every_session_field_is_applied(tmp_path: Path) -> None:
    fields = {
        "intra_op_num_threads": 2,
        "inter_op_num_threads": 1,
        "graph_optimization_level": "basic",
        "execution_mode": "ORT_PARALLEL",
        "enable_cpu_mem_arena": False,
        "enable_mem_pattern": False,
        "session_config_entries": {"session.intra_op.allow_spinning": "0"},
    }
    config = read_options_file(_file(tmp_path, fields)).config
    import onnxruntime as ort

    so = session_options(threads=1, config=config)
    assert so.intra_op_num_threads == 2 and so.inter_op_num_threads == 1  # the file wins
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert so.execution_mode == ort.ExecutionMode.ORT_PARALLEL
    assert so.enable_cpu_mem_arena is False and so.enable_mem_pattern is False
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_the_runner_says_whose_thread_count_runs(relu_onnx: Path, tmp_path: Path) -> None:
    of = read_options_file(
        _file(tmp_path, {"intra_op_num_threads": 2, "providers": ["CPUExecutionProvider"]})
    )
    _, runner = open_baseline("onnxruntime", relu_onnx, BaselineOptions(1, {}, of.config))
    np.testing.assert_array_equal(runner({"in0": X})["out0"], np.maximum(X, 0))
    assert runner.info["intra_op_num_threads"] == 2
    assert "options file" in str(runner.info["intra_op_num_threads_from"])
    assert runner.info["providers"] == ["CPUExecutionProvider"]
    assert runner.info["session_options"] == of.config
    _, plain = open_baseline(
        "onnxruntime", relu_onnx, BaselineOptions(1, {}, {"enable_mem_reuse": True})
    )
    assert plain.info["intra_op_num_threads"] == 1  # luminal's count when the file has none
    assert plain.info["intra_op_num_threads_from"] == "luminal's thread count"
    assert len(of.sha256) == 64 and of.to_json()["fields"] == of.config


def test_provider_options_are_passed_to_the_provider(relu_onnx: Path) -> None:
    config = {
        "providers": ["CPUExecutionProvider"],
        "provider_options": {"CPUExecutionProvider": {}},
    }
    _, runner = open_baseline("onnxruntime", relu_onnx, BaselineOptions(1, {}, config))
    np.testing.assert_array_equal(runner({"in0": X})["out0"], np.maximum(X, 0))
    with pytest.raises(UsageError, match="provider_options names 'CUDAExecutionProvider'"):
        open_baseline(
            "onnxruntime",
            relu_onnx,
            BaselineOptions(1, {}, {**config, "provider_options": {"CUDAExecutionProvider": {}}}),
        )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"intra_op_threads": 2}, "unknown field 'intra_op_threads' for baseline onnxruntime"),
        ({"intra_op_num_threads": "2"}, "field 'intra_op_num_threads' must be int"),
        ({"enable_cpu_mem_arena": 1}, "field 'enable_cpu_mem_arena' must be bool"),
        ({"graph_optimization_level": "max"}, "graph optimization 'max': choose from"),
        ({"execution_mode": "fast"}, "execution_mode 'fast': choose from sequential, parallel"),
        ({"session_config_entries": {"k": 1}}, "session_config_entries.k' must be str"),
        ({"providers": "CPUExecutionProvider"}, "field 'providers' must be list"),
        ({"providers": ["NoSuchExecutionProvider"]}, "none of .* is available"),
    ],
)
def test_bad_fields_are_one_line_usage_errors(relu_onnx: Path, fields: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(UsageError, match=message) as info:
        open_baseline("onnxruntime", relu_onnx, BaselineOptions(1, {}, fields))
    assert "\n" not in str(info.value)


def test_an_option_given_twice_is_refused(relu_onnx: Path) -> None:
    opts = BaselineOptions(1, {"graph_optimization": "all"}, {"graph_optimization_level": "basic"})
    with pytest.raises(UsageError, match="graph_optimization is given twice"):
        open_baseline("onnxruntime", relu_onnx, opts)


def test_the_file_must_be_a_json_object(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{intra_op_num_threads: 2}")
    with pytest.raises(UsageError, match="not JSON"):
        read_options_file(bad)
    with pytest.raises(UsageError, match="expected a JSON object"):
        read_options_file(_file(tmp_path, [1, 2]))
    with pytest.raises(UsageError, match="No such file"):
        read_options_file(tmp_path / "missing.json")


@pytest.mark.parametrize("name", ["torch", "torch-compile", "openvino"])
def test_baselines_without_an_options_file_refuse_one(name: str, tmp_path: Path) -> None:
    from luminal.references import baselines

    with pytest.raises(UsageError, match=f"unknown field 'x' for baseline {name}"):
        baselines.get(name).open(tmp_path / "m.pt2", BaselineOptions(1, {}, {"x": 1}))
