"""`luminal bench` against baselines as the customer runs them: their own nn.Module, ONNX
Runtime with their session options file, OpenVINO; what each report says was timed."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from luminal.metering.report import read

QUICK = ("--duration", "0.2", "--min-runs", "10", "--min-blocks", "4", "--block-ms", "3")
W = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)

NET = """
import numpy as np
import torch


class Net(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = torch.nn.Parameter(torch.from_numpy(w))

    def forward(self, x):
        return torch.relu(x @ self.w)


def build():
    return Net(np.load(__file__.replace("net.py", "w.npy"))).eval()
"""


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory, _licensed_session: None) -> Path:
    """relu(x[2, 16] @ W) as ONNX, compiled; its nn.Module twin in net.py."""
    folder = tmp_path_factory.mktemp("bench-baselines")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "net",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 16])],
        initializer=[numpy_helper.from_array(W, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, folder / "net.onnx")
    np.save(folder / "w.npy", W)
    (folder / "net.py").write_text(textwrap.dedent(NET))
    from luminal.compiler.frontend.onnx import load
    from luminal.compiler.pipeline import CompileOptions, compile_model

    compile_model(
        load(folder / "net.onnx"), folder / "net.lmnl", CompileOptions(budget_seconds=0.0)
    )
    return folder / "net.lmnl"


def _predicate(path: Path) -> dict:  # type: ignore[type-arg]
    return read(path)[1]["predicate"]


@pytest.mark.slow  # heavy (10-25 s): make slow
def test_bench_times_the_customers_own_module(cli, artifact: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.json"
    net = artifact.parent / "net.py"
    rc, _, err = cli(
        "bench", artifact, "-b", "torch", "--model", f"{net}:build",
        "--baseline-opt", "outputs=y", "--scenario", "latency", "--threads", "1", "-o", out, *QUICK,
    )  # fmt: skip
    assert rc in (0, 5), err
    b = _predicate(out)["baseline"]
    assert b["settings"] == {"outputs": "y", "factory": "build"}
    assert b["info"]["module"] == "net.py:build() -> Net" and b["info"]["mode"] == "eager"
    assert b["info"]["inference_mode"] is True and b["info"]["num_threads"] == 1
    assert all(o["ok"] for o in _predicate(out)["parity"]["outputs"])  # same outputs as luminal's


@pytest.mark.slow  # heavy (10-25 s): make slow
def test_bench_with_the_customers_session_options(cli, artifact: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    options = tmp_path / "ort.json"
    options.write_text(json.dumps({"intra_op_num_threads": 1, "enable_cpu_mem_arena": False}))
    out = tmp_path / "r.json"
    rc, _, err = cli(
        "bench", artifact, "--baseline-options", options, "--scenario", "latency",
        "--threads", "2", "-o", out, *QUICK,
    )  # fmt: skip
    assert rc in (0, 5), err
    p = _predicate(out)
    info = p["baseline"]["info"]
    assert info["intra_op_num_threads"] == 1 and "options file" in info["intra_op_num_threads_from"]
    assert p["baseline"]["options_file"]["fields"] == json.loads(options.read_text())
    subjects = {s["name"]: s["digest"]["sha256"] for s in read(out)[1]["subject"]}
    assert subjects["baseline-options:ort.json"] == p["baseline"]["options_file"]["sha256"]


def test_a_bad_options_field_is_exit_2_naming_it(cli, artifact: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    options = tmp_path / "ort.json"
    options.write_text(json.dumps({"intra_op_threads": 1}))
    rc, _, err = cli("bench", artifact, "--baseline-options", options, "-o", tmp_path / "r.json")
    assert rc == 2 and "unknown field 'intra_op_threads'" in err


@pytest.mark.slow  # heavy (10-25 s): make slow
def test_bench_against_openvino(cli, artifact: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("openvino")
    out = tmp_path / "r.json"
    rc, _, err = cli(
        "bench", artifact, "-b", "openvino", "--scenario", "latency", "--threads", "1",
        "-o", out, *QUICK,
    )  # fmt: skip
    assert rc in (0, 5), err
    p = _predicate(out)
    assert p["baseline"]["info"]["properties"]["INFERENCE_NUM_THREADS"] == "1"
    assert all(o["ok"] for o in p["parity"]["outputs"])
