"""Each kernel kind, generated as Triton and run in Triton's interpreter, against the
reference interpreter: fused elementwise through views, reductions and their fused
epilogues, tiled contractions, gathers and scatters.  Every case runs twice: with the
interpreter's one-block launches, and with the block sizes a GPU gets (many programs,
partial tiles at the edges, several K steps)."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np
import onnx
import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from luminal.compiler.backends.triton import CUDA_BACKEND
from luminal.compiler.frontend.onnx import load
from luminal.compiler.ir import DType, GraphBuilder, Op, Value
from luminal.compiler.schedule import schedule
from luminal.compiler.schedule.variant import Variant
from luminal.errors import UsageError
from tests.compiler.backends.triton.tritontest import backend_with, build, check, load_interpreted
from tests.helpers.onnx_cases import node_model

LAUNCHES = pytest.mark.parametrize("gpu_launch", [False, True], ids=["interp-blocks", "gpu-blocks"])
rng = np.random.default_rng(7)


def _f(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _k(b: GraphBuilder, value: np.generic, shape: tuple[int, ...]) -> Value:
    """A scalar constant broadcast to `shape`."""
    return b.expand(b.reshape(b.const(value), (1,) * len(shape)), shape)


def _matmul(b: GraphBuilder, x: Value, w: Value) -> Value:
    """x [..., m, k] @ w [..., k, n] as the IR spells it: a SUM over a broadcast MUL."""
    *batch, m, k = x.shape
    n = w.shape[-1]
    full = (*batch, m, k, n)
    xe = b.expand(b.reshape(x, (*batch, m, k, 1)), full)
    wbatch = w.shape[:-2] or (1,) * len(batch)  # a 2-D weight broadcasts over the batch
    we = b.expand(b.reshape(w, (*wbatch, 1, k, n)), full)
    s = b.reduce(Op.SUM, b.binary(Op.MUL, xe, we), (len(full) - 2,))
    return b.reshape(s, (*batch, m, n))


@LAUNCHES
def test_elementwise_through_views(gpu_launch: bool) -> None:
    b = GraphBuilder()
    x = b.input("x", (5, 7), DType.F32)
    bias = b.input("bias", (7,), DType.F32)
    xt = b.permute(x, (1, 0))  # 7x5
    sl = b.slice(xt, [(1, 2, 3), (4, -1, 5)])  # rows 1,3,5; columns reversed
    padded = b.pad(sl, [(1, 2), (0, 1)], -1.5)  # 6x6
    bb = b.expand(b.reshape(bias, (1, 7)), (5, 7))
    y = b.binary(Op.ADD, x, bb)
    y = b.binary(Op.MAX, y, b.unary(Op.SIN, x))
    pos = b.unary(Op.SQRT, b.binary(Op.MUL, x, x))
    z = b.unary(Op.LOG2, b.binary(Op.ADD, pos, _k(b, np.float32(1), (5, 7))))
    z = b.binary(Op.MUL, b.unary(Op.EXP2, z), b.unary(Op.RECIP, _k(b, np.float32(3), (5, 7))))
    neg = b.binary(Op.CMPLT, x, _k(b, np.float32(0), (5, 7)))
    scaled = b.binary(Op.MUL, bb, _k(b, np.float32(3.7), (5, 7)))  # finite: casts are defined
    w = b.where(neg, b.cast(b.cast(scaled, DType.I32), DType.F32), b.binary(Op.ADD, y, z))
    g = b.build({"padded": padded, "w": w, "io": b.iota((4, 3), 1, DType.I64)})
    feeds = {"x": _f(5, 7), "bias": _f(7)}
    feeds["x"][2, 3] = np.nan  # max propagates NaN as np.maximum does
    check(g, feeds, gpu_launch=gpu_launch)


def test_integer_and_bool_ops() -> None:
    b = GraphBuilder()
    a = b.input("a", (12,), DType.I64)
    d = b.input("d", (12,), DType.I64)
    m = b.binary(Op.MOD, a, d)  # C remainder: sign of the dividend; a zero divisor gives 0
    q = b.binary(Op.IDIV, a, d)  # truncating
    eq = b.binary(Op.CMPEQ, m, _k(b, np.int64(0), (12,)))
    lt = b.binary(Op.CMPLT, q, _k(b, np.int64(1), (12,)))
    both = b.binary(Op.MUL, eq, lt)  # bool AND
    either = b.binary(Op.ADD, eq, lt)  # bool OR
    g = b.build({"m": m, "q": q, "both": both, "either": either, "small": b.cast(q, DType.I8)})
    feeds = {
        "a": np.array([7, -7, 7, -7, 5, 0, 3, 9, 100, -3, 8, 1], np.int64),
        "d": np.array([2, 2, -2, -2, 0, 3, 1, 4, 7, 0, -3, 1], np.int64),
    }
    check(g, feeds)


@LAUNCHES
def test_reductions(gpu_launch: bool) -> None:
    b = GraphBuilder()
    x = b.input("x", (6, 37, 5), DType.F32)
    n = b.input("n", (6, 37), DType.I32)
    flags = b.binary(Op.CMPLT, n, _k(b, np.int32(0), (6, 37)))
    g = b.build(
        {
            "sum_mid": b.reduce(Op.SUM, x, (1,)),  # strided reduced axis
            "sum_last": b.reduce(Op.SUM, x, (2,)),
            "sum_outer": b.reduce(Op.SUM, x, (0, 2)),  # two reduced axes
            "max_all": b.reduce(Op.RMAX, x, (0, 1, 2)),
            "int_sum": b.reduce(Op.SUM, n, (1,)),
            "int_max": b.reduce(Op.RMAX, n, (0,)),
            "any": b.reduce(Op.SUM, flags, (1,)),
        }
    )
    x = _f(6, 37, 5)
    x[4, 10, 2] = np.nan  # only max_all and the sums over it see it
    feeds = {"x": x, "n": rng.integers(-50, 50, (6, 37)).astype(np.int32)}
    check(g, feeds, gpu_launch=gpu_launch)


def _softmax(b: GraphBuilder, x: Value, axis: int) -> Value:
    mx = b.expand(b.reduce(Op.RMAX, x, (axis,)), x.shape)
    shifted = b.binary(Op.ADD, x, b.binary(Op.MUL, mx, _k(b, np.float32(-1), x.shape)))
    log2e = _k(b, np.float32(1.4426950408889634), x.shape)
    e = b.unary(Op.EXP2, b.binary(Op.MUL, shifted, log2e))
    s = b.expand(b.reduce(Op.SUM, e, (axis,)), x.shape)
    return b.binary(Op.MUL, e, b.unary(Op.RECIP, s))


@LAUNCHES
def test_softmax(gpu_launch: bool) -> None:
    b = GraphBuilder()
    x = b.input("x", (6, 1030), DType.F32)  # a row longer than one reduce step
    g = b.build({"y": _softmax(b, x, 1)})
    source = check(g, {"x": 4 * _f(6, 1030)}, gpu_launch=gpu_launch)
    assert "tl.max(acc, 1)" in source and "tl.sum(acc, 1)" in source


@LAUNCHES
def test_layernorm(gpu_launch: bool) -> None:
    b = GraphBuilder()
    shape = (3, 9, 48)
    x = b.input("x", shape, DType.F32)
    inv_n = _k(b, np.float32(1 / 48), (3, 9, 1))
    mean = b.binary(Op.MUL, b.reduce(Op.SUM, x, (2,)), inv_n)
    neg = _k(b, np.float32(-1), shape)
    centered = b.binary(Op.ADD, x, b.binary(Op.MUL, b.expand(mean, shape), neg))
    var = b.binary(Op.MUL, b.reduce(Op.SUM, b.binary(Op.MUL, centered, centered), (2,)), inv_n)
    eps = _k(b, np.float32(1e-5), (3, 9, 1))
    rstd = b.unary(Op.RECIP, b.unary(Op.SQRT, b.binary(Op.ADD, var, eps)))
    gamma = b.expand(b.reshape(b.const(_f(48)), (1, 1, 48)), shape)
    beta = b.expand(b.reshape(b.const(_f(48)), (1, 1, 48)), shape)
    y = b.binary(
        Op.ADD, b.binary(Op.MUL, b.binary(Op.MUL, centered, b.expand(rstd, shape)), gamma), beta
    )
    g = b.build({"y": y})
    sched = schedule(g)
    assert any(k.reduction is not None for k in sched.kernels)  # a fused epilogue is exercised
    check(g, {"x": _f(*shape)}, gpu_launch=gpu_launch)


@LAUNCHES
@pytest.mark.parametrize("kind", ["cuda", "rocm"])
def test_matmul_with_fused_epilogue(kind: str, gpu_launch: bool) -> None:
    b = GraphBuilder()
    x = b.input("x", (37, 53), DType.F32)  # odd sizes: partial tiles on every edge
    w = b.const(_f(53, 29))
    bias = b.expand(b.reshape(b.const(_f(29)), (1, 29)), (37, 29))
    y = b.binary(Op.ADD, _matmul(b, x, w), bias)
    y = b.binary(Op.MAX, y, _k(b, np.float32(0), (37, 29)))  # relu
    g = b.build({"y": y})
    kinds = [k.kind for k in schedule(g).kernels]
    assert kinds == ["contraction"]  # bias and relu run in the tile's registers
    source = check(g, {"x": _f(37, 53)}, kind=kind, gpu_launch=gpu_launch)
    assert "tl.dot(" in source and 'input_precision="ieee"' in source


@LAUNCHES
def test_batched_matmul_with_permuted_operand(gpu_launch: bool) -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 17, 24), DType.F32)
    yt = b.input("yt", (3, 19, 24), DType.F32)
    y = _matmul(b, x, b.permute(yt, (0, 2, 1)))
    g = b.build({"y": y})
    check(g, {"x": _f(3, 17, 24), "yt": _f(3, 19, 24)}, gpu_launch=gpu_launch)


@pytest.mark.parametrize("dtype", [DType.F16, DType.F64])
def test_matmul_in_other_float_types(dtype: DType) -> None:
    b = GraphBuilder()
    x = b.input("x", (5, 24), dtype)
    y = _matmul(b, x, b.const(rng.standard_normal((24, 19)).astype(dtype.np)))
    g = b.build({"y": y, "e": b.unary(Op.EXP2, x)})
    check(g, {"x": rng.standard_normal((5, 24)).astype(dtype.np)}, gpu_launch=True)


@LAUNCHES
def test_convolution_through_the_frontend(tmp_path, gpu_launch: bool) -> None:  # type: ignore[no-untyped-def]
    model = node_model(
        "Conv",
        [_f(1, 3, 11, 9), _f(8, 3, 3, 3), _f(8)],
        {"pads": [1, 2, 1, 0], "strides": [2, 1]},
        consts=(1, 2),
    )
    onnx.save(model, tmp_path / "conv.onnx")
    g = load(tmp_path / "conv.onnx").graph
    assert any(k.kind == "contraction" for k in schedule(g).kernels)
    check(g, {"in0": _f(1, 3, 11, 9)}, gpu_launch=gpu_launch)


def _embedding() -> tuple[GraphBuilder, Value]:
    b = GraphBuilder()
    table = b.const(_f(10, 8))
    ids = b.input("ids", (2, 5), DType.I64)
    return b, b.gather(table, ids, 0)


@LAUNCHES
def test_gather(gpu_launch: bool) -> None:
    b, emb = _embedding()
    g = b.build({"emb": emb})
    check(g, {"ids": rng.integers(0, 10, (2, 5))}, gpu_launch=gpu_launch)


def test_gather_index_out_of_range_is_a_usage_error() -> None:
    b, emb = _embedding()
    exe, _ = load_interpreted(backend_with("cuda"), b.build({"emb": emb}))
    ids = np.array([[0, 1, 2, 3, 10], [0, 0, 0, 0, 0]], np.int64)
    with pytest.raises(UsageError, match="index input is out of range"):
        exe.run({"ids": ids})
    exe.run({"ids": np.zeros((2, 5), np.int64)})  # the flag is cleared for the next run


@LAUNCHES
def test_scatter(gpu_launch: bool) -> None:
    b = GraphBuilder()
    data = b.input("data", (4, 6), DType.F32)
    idx = b.input("idx", (4, 2), DType.I64)
    upd = b.input("upd", (4, 2), DType.F32)
    g = b.build({"out": b.scatter(data, idx, upd, 1)})
    feeds = {
        "data": _f(4, 6),
        "idx": np.array([[0, 5], [1, 2], [3, 4], [5, 0]], np.int64),
        "upd": _f(4, 2),
    }
    check(g, feeds, gpu_launch=gpu_launch)


@LAUNCHES
def test_blas_variant_runs_torch_matmul_then_the_epilogue(gpu_launch: bool) -> None:
    b = GraphBuilder()
    x = b.input("x", (3, 17, 24), DType.F32)
    w = b.input("w", (3, 24, 19), DType.F32)
    y = b.binary(Op.MUL, _matmul(b, x, w), _k(b, np.float32(0.5), (3, 17, 19)))
    g = b.build({"y": b.unary(Op.SIN, y)})
    (k,) = [k.name for k in schedule(g).kernels if k.kind == "contraction"]
    source = check(
        g,
        {"x": _f(3, 17, 24), "w": _f(3, 24, 19)},
        variants={k: Variant(impl="blas")},
        gpu_launch=gpu_launch,
    )
    assert "torch.matmul(" in source and "tl.dot(" not in source


def test_blas_variant_falls_back_when_operands_are_not_matrices() -> None:
    """Attention's output projection reads heads x head-dim as K: two strided axes of its
    input (heads are not adjacent to head-dim in memory), so no matrix view of it exists."""
    b = GraphBuilder()
    heads = b.input("heads", (3, 5, 4), DType.F32)  # [head, token, dim]
    tokens = b.reshape(b.permute(heads, (1, 0, 2)), (5, 12))
    g = b.build({"y": _matmul(b, tokens, b.const(_f(12, 7)))})
    sched = schedule(g)
    variants = {k.name: Variant(impl="blas") for k in sched.kernels if k.kind == "contraction"}
    built = build(CUDA_BACKEND, sched, variants=variants)
    assert "torch.matmul" not in built.members["model.py"].decode()
    assert "generated tiles used" in built.notes["variants"][0]
    check(g, {"heads": _f(3, 5, 4)}, variants=variants, gpu_launch=True)


def test_variant_tiles_become_launch_blocks() -> None:
    b = GraphBuilder()
    x = b.input("x", (200, 300), DType.F32)
    g = b.build({"y": _matmul(b, x, b.const(_f(300, 260)))})
    (k,) = schedule(g).kernels
    built = build(CUDA_BACKEND, schedule(g), variants={k.name: Variant(mr=6, nr=128, kc=64)})
    ns: dict[str, object] = {}
    text = built.members["model.py"].decode()
    exec(text[text.index("LAUNCH = ") : text.index("EXTENTS = ")], ns)  # plain data
    launch = ns["LAUNCH"][k.name]  # type: ignore[index]
    assert (launch["BLOCK_M"], launch["BLOCK_N"], launch["BLOCK_K"]) == (16, 128, 64)


def test_integer_widths_and_half_types() -> None:
    """Unsigned and narrow integers, an f16 transcendental (evaluated in f32, rounded
    once), and bf16 read through a cast.  (bf16 results are not compared: Triton's
    interpreter truncates f32 -> bf16 where a GPU rounds to nearest even.)"""
    b = GraphBuilder()
    bf = b.input("bf", (4, 5), DType.BF16)
    u = b.input("u", (4, 5), DType.U32)
    s = b.input("s", (4, 5), DType.U16)
    q = b.input("q", (4, 5), DType.U64)
    i8 = b.input("i8", (4, 5), DType.I8)
    g = b.build(
        {
            "from_bf16": b.binary(Op.MUL, b.cast(bf, DType.F32), _k(b, np.float32(3), (4, 5))),
            "half_sin": b.unary(Op.SIN, b.cast(b.cast(bf, DType.F32), DType.F16)),
            "u32": b.binary(Op.ADD, u, b.cast(s, DType.U32)),
            "u64": b.binary(Op.MUL, q, b.cast(u, DType.U64)),
            "i8_sum": b.reduce(Op.SUM, i8, (1,)),  # wraps like numpy's
            "u32_max": b.reduce(Op.RMAX, u, (0,)),
        }
    )
    import ml_dtypes

    feeds = {
        "bf": rng.standard_normal((4, 5)).astype(ml_dtypes.bfloat16),
        "u": rng.integers(0, 2**31, (4, 5)).astype(np.uint32),
        "s": rng.integers(0, 60000, (4, 5)).astype(np.uint16),
        "q": rng.integers(0, 2**40, (4, 5)).astype(np.uint64),
        "i8": rng.integers(-128, 127, (4, 5)).astype(np.int8),
    }
    check(g, feeds)


def test_wide_index_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Buffers of 2^30 elements and more index in int64; forced here on a small model."""
    from luminal.compiler.backends.triton import kernels

    monkeypatch.setattr(kernels, "WIDE", 1)
    b, emb = _embedding()
    y = _matmul(b, emb, b.const(_f(8, 3)))
    g = b.build({"y": b.reduce(Op.SUM, y, (2,))})
    source = check(g, {"ids": rng.integers(0, 10, (2, 5))}, gpu_launch=True)
    assert "tl.program_id(0).to(tl.int64)" in source
