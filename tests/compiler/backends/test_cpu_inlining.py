"""The C helpers every kernel calls (`cexpr.PRELUDE`: exp2, log2, clamps, conversions)
are inlined however large the generated file is.  GCC's unit growth limit left
`lum_exp2f` out of line in some kernels of a whole model (efficientnet_b0, regnet), and a
call inside a kernel's loop stops its vectorization: a SiLU depthwise convolution ran 3x
slower in the model than alone.  `-fno-inline` stands in for the limit here: GCC then
inlines only what is marked `always_inline`."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from luminal.compiler.backends.cpu import cexpr, codegen, toolchain
from luminal.compiler.backends.cpu.native import NativeRunner, open_library
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import DType, GraphBuilder
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import schedule

HELPERS = tuple(
    re.findall(r"^(?:LUM_INLINE|static inline) [\w ]+? (lum_\w+)\(", cexpr.PRELUDE, re.M)
)


def test_the_prelude_marks_every_helper_always_inline() -> None:
    assert {"lum_exp2f", "lum_log2f", "lum_clampf"} <= set(HELPERS)
    assert not re.findall(r"^static inline", cexpr.PRELUDE, re.M)  # a helper without the mark


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils' nm is not installed")
def test_helpers_stay_inline_when_the_compiler_inlines_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tc = toolchain.find_toolchain()
    if "zig" in tc.name:
        pytest.skip("the bundled zig compiler: -fno-inline is GCC's and clang's flag")
    b = GraphBuilder()
    x = b.input("x", (4, 96), DType.F32)
    silu = m.mul(b, x, m.sigmoid(b, x))  # exp2
    y = m.add(b, silu, m.log(b, m.add(b, m.mul(b, x, x), b.const(np.float32(1)))))  # log2
    graph = b.build({"y": y})
    flags, features = toolchain.feature_flags(detect_cpu())
    sched = schedule(graph)
    source = codegen.generate(sched, codegen.options_for(features, True))
    data = toolchain.build_shared_library(source, tc, (*flags, "-fno-inline"))
    lib = tmp_path / "model.so"
    lib.write_bytes(data)

    symbols = subprocess.run(["nm", str(lib)], capture_output=True, text=True, check=True)
    out_of_line = {s for s in HELPERS if re.search(rf"\b{s}\b", symbols.stdout)}
    assert not out_of_line, f"helpers compiled out of line: {sorted(out_of_line)}"

    # and the library still computes what the reference does (the runner raises on a
    # non-zero status from lum_run)
    feed = np.random.default_rng(0).standard_normal((4, 96)).astype(np.float32)
    runner = NativeRunner(
        open_library(data),
        sched.weights_blob(),
        sched.arena_bytes,
        graph.input_specs(),
        graph.output_specs(),
    )
    (got,) = runner.run([feed])
    want = reference.run(graph, {"x": feed})["y"]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
