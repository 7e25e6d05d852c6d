"""The exact integer contraction (`backends/cpu/igemm.py`) and what feeds it: value ranges
(`ir/ranges.py`) and int16 operand storage (`ir/narrow.py`).  Small quantized ONNX graphs
built in code, compiled at budget off, equal to the numpy reference interpreter (and to
ONNX Runtime where it runs the op) element for element."""

from __future__ import annotations

import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import luminal
from luminal.compiler.backends.cpu import codegen, igemm, toolchain
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.backends.cpu.variants import candidates
from luminal.compiler.frontend.onnx import load
from luminal.compiler.hardware.cpu import detect_cpu
from luminal.compiler.ir import DType, Graph, Node, Op, interpreter
from luminal.compiler.ir.narrow import narrow_operands
from luminal.compiler.ir.ranges import Interval, bounds
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.compiler.schedule import schedule
from luminal.compiler.schedule.variant import Variant
from luminal.references.oracle import run_oracle

R = np.random.default_rng(7)
FLAGS, FEATURES = toolchain.feature_flags(detect_cpu())
AVX2 = "avx2" in FEATURES


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:  # type: ignore[no-untyped-def]
    g = helper.make_graph(
        nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()]
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path, ort: bool = True) -> str:  # type: ignore[no-untyped-def]
    """Compile and run; equal to the interpreter (and ORT): returns the generated C."""
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    loaded = load(path)
    art = tmp_path / "m.lmnl"
    compile_model(loaded, art, CompileOptions(budget_seconds=None))
    got = luminal.load(art).run(feeds)
    want = interpreter.run(loaded.graph, feeds)
    for name, w in want.items():
        assert got[name].dtype == w.dtype and np.array_equal(got[name], w), name
    if ort:
        theirs = run_oracle("onnxruntime", path, feeds)
        for name, w in theirs.items():
            assert np.array_equal(got[name], w), name
    with zipfile.ZipFile(art) as z:
        return z.read("model.c").decode()


def _u8(*shape: int) -> np.ndarray:
    return R.integers(0, 256, shape).astype(np.uint8)


def _i8(*shape: int) -> np.ndarray:
    return R.integers(-128, 128, shape).astype(np.int8)


@pytest.mark.parametrize(
    ("m", "k", "n", "batch", "per_row"),
    [
        (16, 64, 48, (), False),
        (7, 33, 19, (), True),
        (5, 1, 3, (), False),
        (3, 17, 40, (2,), False),
        (50, 130, 70, (), True),
    ],
)
def test_matmul_integer_equals_the_reference(m, k, n, batch, per_row, tmp_path) -> None:  # type: ignore[no-untyped-def]
    a_zp = _u8(m) if per_row and not batch else np.array(R.integers(0, 256), np.uint8)
    inits = {"B": _i8(k, n), "az": a_zp, "bz": _i8(n)}
    node = helper.make_node("MatMulInteger", ["A", "B", "az", "bz"], ["Y"])
    model = _model(
        [node],
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [*batch, m, k])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, None)],
        inits,
    )
    # ORT takes only a per-tensor zero point for A: per-row is checked against the reference
    c = _check(model, {"A": _u8(*batch, m, k)}, tmp_path, ort=not per_row)
    assert ("_mm256_madd_epi16" in c) == AVX2


def test_a_batch_of_weights_is_a_batch_of_products(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """B varies along the batch: each batch index packs its own X rows and Y panels."""
    node = helper.make_node("MatMulInteger", ["A", "B", "az", "bz"], ["Y"])
    model = _model(
        [node],
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [3, 10, 21])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, None)],
        {"B": _i8(3, 21, 35), "az": np.array(77, np.uint8), "bz": np.array(5, np.int8)},
    )
    c = _check(model, {"A": _u8(3, 10, 21)}, tmp_path)
    assert ("_mm256_madd_epi16" in c) == AVX2


@pytest.mark.parametrize(
    ("cin", "cout", "hw", "kernel", "stride", "pads", "group"),
    [
        (3, 8, 7, 3, 1, [1, 1, 1, 1], 1),
        (4, 6, 9, 3, 2, [0, 1, 1, 0], 2),
        (5, 17, 5, 1, 1, [0, 0, 0, 0], 1),
    ],
)
def test_conv_integer_equals_the_reference(
    cin, cout, hw, kernel, stride, pads, group, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    w = _i8(cout, cin // group, kernel, kernel)
    node = helper.make_node(
        "ConvInteger", ["x", "w", "xz", "wz"], ["y"], strides=[stride] * 2, pads=pads, group=group
    )
    model = _model(
        [node],
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, cin, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        {"w": w, "xz": np.array(131, np.uint8), "wz": np.array(3, np.int8)},
    )
    c = _check(model, {"x": _u8(1, cin, hw, hw)}, tmp_path)
    assert ("_mm256_madd_epi16" in c) == AVX2


@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_requantizes_in_the_store(per_channel, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cout, cin = 12, 6
    ws = R.uniform(0.002, 0.01, cout if per_channel else ()).astype(np.float32)
    wz = (R.integers(-5, 5, cout) if per_channel else np.array(2)).astype(np.int8)
    inits = {
        "xs": np.array(0.02, np.float32),
        "xz": np.array(120, np.uint8),
        "w": _i8(cout, cin // 2, 3, 3),
        "ws": ws,
        "wz": wz,
        "ys": np.array(0.05, np.float32),
        "yz": np.array(100, np.uint8),
        "b": R.integers(-3000, 3000, cout).astype(np.int32),
    }
    node = helper.make_node(
        "QLinearConv",
        ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
        ["y"],
        pads=[1, 1, 1, 1],
        strides=[1, 1],
        group=2,
    )
    model = _model(
        [node],
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, cin, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        inits,
    )
    # ORT's requantize rounds in its own order; the reference is the integer oracle here
    c = _check(model, {"x": _u8(1, cin, 8, 8)}, tmp_path, ort=False)
    assert ("_mm256_madd_epi16" in c) == AVX2


def test_qlinear_matmul_equals_the_reference(tmp_path) -> None:  # type: ignore[no-untyped-def]
    inits = {
        "as": np.array(0.02, np.float32),
        "az": np.array(100, np.uint8),
        "b": _u8(37, 21),
        "bs": np.array(0.03, np.float32),
        "bz": np.array(120, np.uint8),
        "ys": np.array(0.5, np.float32),
        "yz": np.array(90, np.uint8),
    }
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    model = _model(
        [node],
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [9, 37])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        inits,
    )
    c = _check(model, {"a": _u8(9, 37)}, tmp_path, ort=False)
    assert ("_mm256_madd_epi16" in c) == AVX2


def test_ranges_follow_casts_constants_and_arithmetic() -> None:
    def c(v: int) -> Node:
        return Node(Op.CONST, (), (1,), DType.I32, str(v))

    sh = (4, 8)
    nodes = (
        Node(Op.INPUT, (), sh, DType.U8, "x"),  # 0
        Node(Op.CAST, (0,), sh, DType.I32),  # 1: [0, 255]
        c(-128),  # 2
        Node(Op.EXPAND, (2,), sh, DType.I32, sh),  # 3
        Node(Op.ADD, (1, 3), sh, DType.I32),  # 4: x - 128
        c(-2),  # 5
        Node(Op.EXPAND, (5,), sh, DType.I32, sh),  # 6
        Node(Op.MUL, (4, 6), sh, DType.I32),  # 7: [-254, 256]
        Node(Op.MAX, (4, 7), sh, DType.I32),  # 8
        Node(Op.CAST, (7,), sh, DType.I8),  # 9: wraps
        c(1 << 30),  # 10
        Node(Op.EXPAND, (10,), sh, DType.I32, sh),  # 11
        Node(Op.MUL, (1, 11), sh, DType.I32),  # 12: may wrap
        Node(Op.CONST, (), (2,), DType.I32, "w"),  # 13
    )
    consts = {str(v): np.array([v], np.int32) for v in (-128, -2, 1 << 30)}
    consts["w"] = np.array([-3, 7], np.int32)
    g = Graph(nodes, (("x", 0),), (("y", 8), ("z", 9), ("u", 12), ("w", 13)), consts)
    r = bounds(g)
    assert r[1] == Interval(0, 255)
    assert r[4] == Interval(-128, 127)
    assert r[7] == Interval(-254, 256)
    assert r[8] == Interval(-128, 256)
    assert r[9] == Interval(-128, 127)
    assert r[12] == Interval(-(2**31), 2**31 - 1)
    assert r[13] == Interval(-3, 7)
    assert Interval(-255, 255).within(DType.I16) and not Interval(0, 256).within(DType.U8)


def test_the_operands_are_stored_as_int16(tmp_path) -> None:  # type: ignore[no-untyped-def]
    node = helper.make_node("MatMulInteger", ["A", "B", "az", "bz"], ["Y"])
    model = _model(
        [node],
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [4, 6])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, None)],
        {"B": _i8(6, 5), "az": np.array(9, np.uint8), "bz": np.array(-4, np.int8)},
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    g = load(path).graph
    n = narrow_operands(g)
    (mul,) = [x for x in n.nodes if x.op is Op.MUL and x.dtype is DType.I32]
    stored = []
    for s in mul.src:
        while n.nodes[s].op is not Op.CAST:
            s = n.nodes[s].src[0]
        stored.append(n.nodes[n.nodes[s].src[0]].dtype)
    assert stored == [DType.I16, DType.I16]
    feeds = {"A": _u8(4, 6)}
    assert np.array_equal(interpreter.run(n, feeds)["Y"], interpreter.run(g, feeds)["Y"])


def test_the_search_times_the_portable_loop_against_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    node = helper.make_node("MatMulInteger", ["A", "B", "az", "bz"], ["Y"])
    model = _model(
        [node],
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [32, 40])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, None)],
        {"B": _i8(40, 48), "az": np.array(9, np.uint8), "bz": np.array(-4, np.int8)},
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    sched = schedule(narrow_operands(load(path).graph))
    (k,) = [k for k in sched.kernels if k.kind == "contraction"]
    assert igemm.legal(sched, k, "avx2") and not igemm.legal(sched, k, "")
    found = candidates(sched, k, ("avx2", "fma"))
    assert Variant(impl="loop") in found and Variant(mr=4, nr=24) in found
    assert Variant(impl="loop") not in candidates(sched, k, ())


@pytest.mark.parametrize(
    "variant",
    [
        *(Variant(mr=mr, nr=nr) for mr, nr in igemm.TILES),
        Variant(impl="loop"),
        Variant(parallel=True),
        Variant(parallel=False),
    ],
    ids=lambda v: v.label,
)
def test_every_variant_the_search_may_pick_is_exact(variant, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A strided convolution (K = 5 x 3 x 3, odd, read through an offset table) and a
    ragged matmul, natively in each variant, equal to the reference."""
    nodes = [
        helper.make_node(
            "ConvInteger", ["x", "w", "xz", "wz"], ["c"], strides=[2, 2], pads=[1] * 4
        ),
        helper.make_node("MatMulInteger", ["A", "B", "az", "bz"], ["Y"]),
    ]
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 5, 13, 13]),
            helper.make_tensor_value_info("A", TensorProto.UINT8, [29, 45]),
        ],
        [
            helper.make_tensor_value_info("c", TensorProto.INT32, None),
            helper.make_tensor_value_info("Y", TensorProto.INT32, None),
        ],
        {
            "w": _i8(11, 5, 3, 3),
            "xz": np.array(99, np.uint8),
            "wz": np.array(-7, np.int8),
            "B": _i8(45, 53),
            "az": np.array(201, np.uint8),
            "bz": np.array(3, np.int8),
        },
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    g = narrow_operands(load(path).graph)
    sched = schedule(g)
    names = [k.name for k in sched.kernels if k.kind == "contraction"]
    assert len(names) == 2
    options = codegen.options_for(FEATURES, True, variants={n: variant for n in names})
    feeds = {"x": _u8(1, 5, 13, 13), "A": _u8(29, 45)}
    got = NativeLibrary.build(sched, options, FLAGS).run(feeds)
    for name, want in interpreter.run(g, feeds).items():
        assert np.array_equal(got[name], want), name
    madd = "_mm256_madd_epi16" in codegen.generate(sched, options)
    assert madd == (AVX2 and variant.impl != "loop")
