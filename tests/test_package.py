"""The installed package: layout, public names, console script."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import luminal
import luminal.errors


def test_top_level_folders_are_luminal_subpackages() -> None:
    for name in (
        "cli",
        "compiler",
        "installers",
        "integrations",
        "licensing",
        "metering",
        "references",
    ):
        module = importlib.import_module(f"luminal.{name}")
        assert module.__name__ == f"luminal.{name}"


def test_errors_all_is_complete_and_exit_codes_documented() -> None:
    exported = {
        n
        for n in dir(luminal.errors)
        if isinstance(getattr(luminal.errors, n), type)
        and issubclass(getattr(luminal.errors, n), luminal.errors.LuminalError)
    }
    assert exported == set(luminal.errors.__all__)
    codes = {cls.exit_code for cls in map(lambda n: getattr(luminal.errors, n), exported)}
    assert codes == {1, 2, 3, 4, 5, 6, 7}
    assert codes | {0, 130} == {code for code, _ in luminal.errors.EXIT_CODES}
    doc = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    for code in (2, 3, 4, 5, 6, 7):
        assert f"| {code} " in doc


def test_console_script() -> None:
    exe = Path(sys.executable).parent / "luminal"
    assert exe.is_file()
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"luminal {luminal.__version__}"


_ORT_SESSION = """
import luminal, os, onnxruntime as ort
from onnx import TensorProto, helper
g = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
print(os.environ["ORT_DISABLE_TELEMETRY"])
"""


def test_onnx_runtime_telemetry_is_off_unless_the_user_chose(tmp_path: Path) -> None:
    """ORT's telemetry file in the home folder is never written by a process that imported
    luminal first, and a user's own setting of the variable is kept (whether ORT then
    writes is ORT's business: it also stays quiet where `CI` is set)."""
    import os

    for setting, want in ((None, "1"), ("0", "0")):
        home = tmp_path / f"home-{setting}"
        env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
        env["HOME"] = str(home)
        if setting is not None:
            env["ORT_DISABLE_TELEMETRY"] = setting
        out = subprocess.run(
            [sys.executable, "-c", _ORT_SESSION], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [want]
        if setting is None:
            assert not (home / ".cache" / "Microsoft").exists()
