"""A one-node ONNX model that both the baselines and the oracle run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.helpers.onnx_cases import node_model


@pytest.fixture(scope="package")
def relu_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Relu on in0 f32[2, 3] -> out0."""
    path = tmp_path_factory.mktemp("references") / "relu.onnx"
    onnx.save(node_model("Relu", [np.zeros((2, 3), np.float32)]), path)
    return path
