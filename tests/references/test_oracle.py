"""The oracle of `luminal run --compare`: one run of an entry of the baselines registry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from luminal.errors import UsageError
from luminal.references import baselines
from luminal.references.baselines import BaselineOptions, Runner
from luminal.references.oracle import ORACLES, run_oracle


def test_onnxruntime_oracle_runs_the_model(relu_onnx: Path) -> None:
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    out = run_oracle("onnxruntime", relu_onnx, {"in0": x})
    assert list(out) == ["out0"]
    np.testing.assert_array_equal(out["out0"], np.maximum(x, 0))


def test_the_oracle_is_the_registry_entry_opened_for_a_reference(
    relu_onnx: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[BaselineOptions] = []

    class Recording:
        name = "onnxruntime"
        formats = (".onnx",)

        def open(self, model: Path, options: BaselineOptions) -> Runner:
            opened.append(options)
            return Runner(lambda feeds: {"y": np.asarray(feeds["x"]) * 2}, {})

    monkeypatch.setitem(baselines.BUILTIN, "onnxruntime", Recording)
    out = run_oracle("onnxruntime", relu_onnx, {"x": np.ones(2)})
    np.testing.assert_array_equal(out["y"], [2.0, 2.0])
    # CPU only (a reference must not depend on the machine's GPU) and ORT's own threads.
    assert opened == [BaselineOptions(None, {"providers": "CPUExecutionProvider"})]


def test_wrong_file_type_and_unknown_oracle_are_usage_errors(relu_onnx: Path) -> None:
    assert ORACLES == ("onnxruntime", "torch")
    with pytest.raises(UsageError, match=r"torch compares \.pt2 ExportedPrograms only"):
        run_oracle("torch", relu_onnx, {})
    with pytest.raises(UsageError, match="ONNX Runtime compares ONNX models only"):
        run_oracle("onnxruntime", relu_onnx.with_suffix(".pt2"), {})
    # torch.compile and TVM are baselines to beat, not references.
    with pytest.raises(UsageError, match="unknown oracle 'tvm'; choose from onnxruntime, torch"):
        run_oracle("tvm", relu_onnx, {})


def test_torch_oracle_runs_the_exported_program(tmp_path: Path) -> None:
    import torch

    class Double(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    path = tmp_path / "double.pt2"
    torch.export.save(torch.export.export(Double(), (torch.zeros(3),)), path)
    threads = torch.get_num_threads()
    out = run_oracle("torch", path, {"x": np.arange(3, dtype=np.float32)})
    np.testing.assert_array_equal(out["output0"], [0.0, 2.0, 4.0])
    assert torch.get_num_threads() == threads  # an oracle leaves torch's threads alone
