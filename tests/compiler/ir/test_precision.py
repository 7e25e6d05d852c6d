"""Reduced precision (`--precision fp16|bf16`): small models built in code, compiled for
the CPU, against ONNX Runtime's f32 run within the precision's documented tolerance;
the weights stored in the reduced type in the artifact's weights.bin."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import luminal
from luminal.compiler.artifact import read_artifact
from luminal.compiler.backends.cpu import codegen
from luminal.compiler.frontend.onnx import load as load_onnx
from luminal.compiler.frontend.onnx import lower as lower_onnx
from luminal.compiler.ir import DType, Op
from luminal.compiler.ir.precision import Precision, lower, narrow_array
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.compiler.schedule import schedule
from luminal.references.parity import PRECISION_TOLERANCE, compare, precision_tolerance

REDUCED = (Precision.FP16, Precision.BF16)
AVX2 = ("avx", "avx2", "fma", "f16c")


def _model(nodes, inputs, output, weights) -> onnx.ModelProto:  # type: ignore[no-untyped-def]
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(output[0], TensorProto.FLOAT, output[1])],
        [numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mlp(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    w = {
        "w1": rng.standard_normal((64, 128)).astype(np.float32) * 0.1,
        "b1": rng.standard_normal(128).astype(np.float32),
        "w2": rng.standard_normal((128, 32)).astype(np.float32) * 0.1,
        "b2": rng.standard_normal(32).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["h2"]),
        helper.make_node("Relu", ["h2"], ["h3"]),
        helper.make_node("MatMul", ["h3", "w2"], ["h4"]),
        helper.make_node("Add", ["h4", "b2"], ["y"]),
    ]
    feeds = {"x": rng.standard_normal((8, 64)).astype(np.float32)}
    return _model(nodes, [("x", [8, 64])], ("y", [8, 32]), w), feeds


def convnet(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    w = {
        "w1": (rng.standard_normal((8, 3, 3, 3)) * 0.2).astype(np.float32),
        "b1": rng.standard_normal(8).astype(np.float32),
        "w2": (rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32),
        "b2": rng.standard_normal(16).astype(np.float32),
        "wf": (rng.standard_normal((16, 10)) * 0.2).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "wf"], ["y"]),
    ]
    feeds = {"x": rng.standard_normal((2, 3, 16, 16)).astype(np.float32)}
    return _model(nodes, [("x", [2, 3, 16, 16])], ("y", [2, 10]), w), feeds


MODELS = {"mlp": mlp, "convnet": convnet}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, _licensed_session: None):  # type: ignore[no-untyped-def]
    """(model, precision) -> (artifact path, CompileResult, ORT f32 outputs, feeds)."""
    tmp = tmp_path_factory.mktemp("precision")
    cache = {}

    def get(name: str, precision: Precision):  # type: ignore[no-untyped-def]
        if (name, precision) not in cache:
            model, feeds = MODELS[name](np.random.default_rng(0))
            want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
            src = tmp / f"{name}.onnx"
            onnx.save(model, src)  # `run --compare` runs the oracle on it
            path = tmp / f"{name}-{precision.value}.lmnl"
            options = CompileOptions(precision=precision)
            result = compile_model(load_onnx(src), path, options)
            cache[name, precision] = (path, result, {"y": want[0]}, feeds)
        return cache[name, precision]

    return get


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("precision", REDUCED, ids=lambda p: p.value)
def test_reduced_build_matches_onnxruntime_f32(built, name: str, precision: Precision) -> None:  # type: ignore[no-untyped-def]
    path, result, want, feeds = built(name, precision)
    got = luminal.load(path).run(feeds)
    tol = precision_tolerance(precision)
    parity = compare(got, want, tol)
    assert parity.ok, parity.to_json()
    assert result.check is not None and result.check.status.value == "passed", result.check
    # really rounded: not the f32 answer, whose error is ~1e-6
    assert parity.max_abs > 1e-5
    assert got["y"].dtype == np.float32  # the caller's type comes back


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("precision", REDUCED, ids=lambda p: p.value)
def test_weights_stored_reduced(built, name: str, precision: Precision) -> None:  # type: ignore[no-untyped-def]
    path, result, _, _ = built(name, precision)
    _, fp32, _, _ = built(name, Precision.FP32)
    blob = read_artifact(path).members["weights.bin"]
    assert len(blob) == result.weights_bytes
    assert result.weights_bytes <= 0.55 * fp32.weights_bytes  # halved, up to alignment
    # every weight the model gave is in the blob, as its reduced-type bytes
    sched = result.schedule
    assert sched is not None
    model, _ = MODELS[name](np.random.default_rng(0))
    original = lower_onnx(model, {}).graph.consts
    stored = [(sched.graph.nodes[i].arg, off) for i, off in sched.weights if i >= 0]
    assert stored
    for key, offset in stored:
        want = original[key].astype(precision.storage.np)
        assert blob[offset : offset + want.nbytes] == want.tobytes(), key
    manifest = read_artifact(path).manifest
    assert manifest.options["precision"] == precision.value
    assert result.precision == precision.value
    # contractions stay contractions: the schedule reads the narrow weight through its cast
    assert result.kernel_kinds["contraction"] == fp32.kernel_kinds["contraction"]


def test_fp32_is_unchanged(built, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, feeds = mlp(np.random.default_rng(0))
    graph = lower_onnx(model, {}).graph
    assert lower(graph, Precision.FP32) is graph
    assert lower(graph, Precision.AUTO) is graph  # auto builds fp32 (docs/compiler.md)
    default = tmp_path / "default.lmnl"
    compile_model(lower_onnx(model, {}), default)
    path, _, _, _ = built("mlp", Precision.FP32)
    a, b = read_artifact(default), read_artifact(path)
    assert a.members["weights.bin"] == b.members["weights.bin"]
    assert luminal.load(default).run(feeds)["y"].tobytes() == (
        luminal.load(path).run(feeds)["y"].tobytes()
    )
    assert b.manifest.options["precision"] == "fp32"


def test_auto_records_what_it_built(tmp_path: Path) -> None:
    model, _ = mlp(np.random.default_rng(0))
    path = tmp_path / "auto.lmnl"
    result = compile_model(lower_onnx(model, {}), path, CompileOptions(precision=Precision.AUTO))
    assert result.precision == "fp32"
    assert read_artifact(path).manifest.options["precision"] == "fp32"


@pytest.mark.parametrize("precision", REDUCED, ids=lambda p: p.value)
def test_lowering_rounds_once_per_op(precision: Precision) -> None:
    model, feeds = mlp(np.random.default_rng(0))
    graph = lower_onnx(model, {}).graph
    low = lower(graph, precision)
    storage = precision.storage
    consts = [n for n in low.nodes if n.op is Op.CONST]
    assert consts and all(n.dtype is storage for n in consts)
    assert all(low.consts[n.arg].dtype == storage.np for n in consts)
    narrowing = [n for n in low.nodes if n.op is Op.CAST and n.dtype is storage]
    # the input once, then MatMul, Add, Relu, MatMul, Add: one rounding each
    assert len(narrowing) == 6
    # no rounding between a contraction's multiply and its sum
    for n in low.nodes:
        if n.op is Op.SUM:
            assert low.nodes[n.src[0]].op is Op.MUL
    assert low.input_specs() == graph.input_specs()
    assert low.output_specs() == graph.output_specs()
    from luminal.compiler.ir import interpreter

    got = interpreter.run(low, feeds)["y"]
    want = interpreter.run(graph, feeds)["y"]
    assert compare({"y": got}, {"y": want}, precision_tolerance(precision)).ok
    # each output is a value of the reduced type, widened exactly
    assert np.array_equal(got.astype(storage.np).astype(np.float32), got)


def test_fp16_weights_clamped_to_range() -> None:
    a = np.array([1e6, -3.4e38, np.inf, 0.1], np.float32)
    got = narrow_array(a, DType.F16)
    assert got.dtype == np.float16
    assert got[0] == 65504 and got[1] == -65504 and np.isinf(got[2])
    assert narrow_array(a, DType.BF16).dtype == np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("precision", REDUCED, ids=lambda p: p.value)
def test_gemm_widens_the_weight_panel(precision: Precision) -> None:
    """The vector gemm takes a narrow weight (it widens the packed panel); with F16C the
    fp16 panel converts eight at a time."""
    model, _ = mlp(np.random.default_rng(0))
    sched = schedule(lower(lower_onnx(model, {}).graph, precision))
    code = codegen.generate(sched, codegen.options_for(AVX2, True))
    assert "ypack" in code  # the vector gemm, not the portable loop nest
    if precision is Precision.FP16:
        assert "_mm256_cvtph_ps" in code and "const _Float16 *src" in code
    else:
        assert "lum_bf16_to_f32(src[j])" in code


def test_precision_tolerance_table() -> None:
    assert precision_tolerance("fp32") is None and precision_tolerance("auto") is None
    assert precision_tolerance(Precision.FP16) == PRECISION_TOLERANCE["fp16"]
    assert PRECISION_TOLERANCE["bf16"].rtol > PRECISION_TOLERANCE["fp16"].rtol


def test_cli_compile_precision(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, _ = mlp(np.random.default_rng(0))
    src = tmp_path / "mlp.onnx"
    onnx.save(model, src)
    code, out, err = cli(
        "compile", src, "-o", tmp_path / "m.lmnl", "--budget", "off", "--precision", "bf16"
    )
    assert code == 0, err
    assert "bf16 (weights stored bf16" in out
    code, out, err = cli(
        "compile",
        src,
        "-o",
        tmp_path / "j.lmnl",
        "--budget",
        "off",
        "--precision",
        "fp16",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["precision"] == "fp16"
    code, _, err = cli("compile", src, "--budget", "off", "--precision", "fp8")
    assert code == 2 and "fp8" in err


def test_bench_tolerances_follow_the_artifacts_precision() -> None:
    from luminal.metering.bench.outputs import DEFAULT_TOLERANCES, for_precision, parse_tolerances

    assert for_precision(DEFAULT_TOLERANCES, "fp32") == dict(DEFAULT_TOLERANCES)
    assert for_precision(DEFAULT_TOLERANCES, None) == dict(DEFAULT_TOLERANCES)  # older manifest
    table = for_precision(parse_tolerances(["f64=1e-3,1e-3"]), "fp16")
    bound = PRECISION_TOLERANCE["fp16"]
    assert table["f32"] == bound and table["f16"] == bound
    assert (table["f64"].rtol, table["f64"].atol) == (1e-3, 1e-3)  # --tol wins


def test_run_compare_holds_a_reduced_artifact_to_its_bound(built, cli) -> None:  # type: ignore[no-untyped-def]
    path, _, _, _ = built("mlp", Precision.FP16)
    code, out, err = cli("run", path, "--compare", "onnxruntime", "--json")
    assert code == 0, err
    assert json.loads(out)["parity"]["rtol"] == PRECISION_TOLERANCE["fp16"].rtol
    # at f32's bound the same outputs disagree: exit 5
    code, _, err = cli("run", path, "--compare", "onnxruntime", "--rtol", "1e-4", "--atol", "1e-5")
    assert code == 5, err


def test_fp16_round_trip_is_bit_exact(tmp_path: Path) -> None:
    """The vectorizable rounding the C backend emits for f32 -> fp16 -> f32
    (`lum_round_f16`) against numpy's float16, on random bit patterns and the edges:
    ties, subnormals, the overflow threshold, infinities and NaN."""
    from luminal.compiler.ir import GraphBuilder
    from tests.helpers.compiled import compile_and_run

    rng = np.random.default_rng(3)
    edges = [0.0, -0.0, 65504, 65519.99, 65520, -65520, 6.1035156e-05, 2.98e-08, 2.99e-08, 1e-45]
    bits = rng.integers(0, 2**32, size=1 << 16, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([bits.view(np.float32), np.array([*edges, np.inf, -np.inf, np.nan], "f4")])
    b = GraphBuilder()
    v = b.input("x", x.shape, DType.F32)
    graph = b.build({"y": b.cast(b.cast(v, DType.F16), DType.F32)})
    got = compile_and_run(graph, {"x": x}, tmp_path)["y"]
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), x[~same][:5]
    code = codegen.generate(schedule(graph), codegen.options_for(AVX2, True))
    assert "lum_round_f16(" in code.split("static int k0")[1]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_rounding_adds_no_kernels(built, name: str) -> None:  # type: ignore[no-untyped-def]
    """Roundings sit inside the kernels fp32 has: at most the input's rounding is more."""
    _, fp32, _, _ = built(name, Precision.FP32)
    for precision in REDUCED:
        _, result, _, _ = built(name, precision)
        assert fp32.kernels <= result.kernels <= fp32.kernels + 1
