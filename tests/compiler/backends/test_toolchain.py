"""Finding a C compiler, CPU feature flags, and the bundled zig fallback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import luminal
from luminal.compiler.backends.cpu.toolchain import feature_flags, find_toolchain
from luminal.compiler.frontend.onnx import load
from luminal.compiler.hardware import CpuInfo
from luminal.compiler.pipeline import compile_model
from luminal.errors import CompilerError
from tests.helpers.onnx_cases import node_model


def test_explicit_compiler_that_does_not_exist() -> None:
    with pytest.raises(CompilerError, match="LUMINAL_CC='no-such-cc'"):
        find_toolchain({"LUMINAL_CC": "no-such-cc", "PATH": ""})


def test_system_compiler_is_preferred() -> None:
    tc = find_toolchain({"PATH": "/usr/bin:/bin"})
    assert tc.name in ("cc", "gcc", "clang") and tc.command[0].startswith("/usr/bin")


def test_no_compiler_on_path_falls_back_to_zig() -> None:
    tc = find_toolchain({"PATH": ""})
    assert tc.name == "zig cc"


def test_feature_flags_follow_the_cpu() -> None:
    avx2 = CpuInfo(
        "x86_64", "test", "GenuineIntel", 4, ("sse4_2", "avx", "avx2", "fma", "f16c"), None
    )
    flags, used = feature_flags(avx2)
    assert flags == ("-msse4.2", "-mavx", "-mavx2", "-mfma", "-mf16c") and "avx512f" not in used
    arm = CpuInfo("aarch64", "test", "0x41", 2, ("asimd",), None)
    assert feature_flags(arm) == ((), ())


def test_model_compiled_with_zig_runs_and_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUMINAL_CC", "zig")
    rng = np.random.default_rng(0)
    x, w = (
        rng.standard_normal((4, 16)).astype(np.float32),
        rng.standard_normal((16, 8)).astype(np.float32),
    )
    model = node_model("MatMul", [x, w], consts=(1,))
    onnx.save(model, tmp_path / "m.onnx")
    result = compile_model(load(tmp_path / "m.onnx"), tmp_path / "m.lmnl")
    assert result.toolchain.startswith("zig cc")
    out = luminal.load(tmp_path / "m.lmnl").run({"in0": x})["out0"]
    np.testing.assert_allclose(out, x @ w, rtol=1e-5, atol=1e-5)
