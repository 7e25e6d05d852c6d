"""The CPU tuner's kernel bench (one timing library: real inputs, a reference check,
interleaved timing, a wrong candidate refused whatever its speed) and its cost model."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.backends.cpu import bench, codegen, costmodel, toolchain
from luminal.compiler.frontend.compose.contraction import matmul
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.inputs import random_inputs
from luminal.compiler.ir import DType, Op
from luminal.compiler.ir.builder import GraphBuilder
from luminal.compiler.schedule import schedule
from luminal.compiler.schedule.variant import Variant
from luminal.compiler.search import tuner
from luminal.compiler.search.tuner import Machine, Rounds, kendall_tau
from tests.compiler.search.search_graphs import mlp_block

WRONG = Variant(mr=3, nr=8)  # the test's sabotaged candidate


def _build(sched, candidates):  # type: ignore[no-untyped-def]
    cpu = detect_cpu()
    flags, features = toolchain.feature_flags(cpu)
    tc = toolchain.find_toolchain()
    cg = codegen.CodegenOptions(mr=4, nr=8, fma="fma" in features, openmp=tc.openmp)
    feeds = random_inputs(sched.graph.input_specs())
    return bench.build(sched, cg, candidates, tc, flags, sched.weights_blob(), feeds)


def test_every_candidate_is_checked_then_timed() -> None:
    sched = schedule(mlp_block(layers=3))
    k = [k for k in sched.kernels if k.kind == "contraction"][1]
    variants = (Variant(), Variant(mr=2, nr=8), Variant(parallel=False), Variant(parallel=True))
    lib = _build(sched, {k.name: variants})
    timings = lib.measure(k, variants, [0, 1, 2, 3], rounds=Rounds(stop_ratio=1e9))
    assert [t.variant for t in timings] == list(variants)
    assert all(t.ok and t.samples >= 6 and 0 < t.seconds < 0.1 for t in timings)
    assert all(t.max_error < 1e-4 for t in timings)


def test_a_bench_extended_with_candidates_checks_and_times_them_on_its_model() -> None:
    sched = schedule(mlp_block(layers=3))
    ks = [k for k in sched.kernels if k.kind == "contraction"]
    defaults = _build(sched, {k.name: (Variant(),) for k in ks})
    (t,) = defaults.measure(ks[2], (Variant(),), [0])
    assert t.ok and t.seconds > 0
    # the last layer: it reads what the model computed before it, in the defaults' library
    variants = (Variant(mr=2, nr=8), Variant(parallel=False))
    more = defaults.extended({ks[2].name: variants})
    timings = more.measure(ks[2], variants, [0, 1], rounds=Rounds(stop_ratio=1e9))
    assert all(t.ok and t.max_error < 1e-4 and t.seconds > 0 for t in timings)
    source = bench.timing_source(sched, codegen.CodegenOptions(), {ks[2].name: variants}, False)
    assert "lum_prefix" not in source.split("#define LUM_NO_MODEL")[0]  # no model code
    assert "lum_run" not in source


def test_a_wrong_candidate_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = codegen.generate_kernel

    def sabotaged(sched, kernel, options, variant=None, name=None):  # type: ignore[no-untyped-def]
        text = real(sched, kernel, options, variant, name)
        if variant == WRONG:
            # Correct code, then one element spoiled: fast and wrong.
            text = text.replace("    return err;\n}", "    out[0] += 0.5f;\n    return err;\n}")
            assert "+= 0.5f" in text
        return text

    monkeypatch.setattr(codegen, "generate_kernel", sabotaged)
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (7, 20), DType.F32)
    w = b.const(rng.standard_normal((20, 24)).astype(np.float32), DType.F32)
    sched = schedule(b.build({"y": matmul(b, x, w)}))
    (k,) = [k for k in sched.kernels if k.kind == "contraction"]
    variants = (Variant(), WRONG)
    lib = _build(sched, {k.name: variants})
    good, bad = lib.measure(k, variants, [1, 0])[::-1]
    assert good.ok and good.seconds < float("inf")
    assert (
        not bad.ok and bad.seconds == float("inf") and bad.max_error == pytest.approx(0.5, rel=1e-3)
    )


def test_a_candidate_much_less_accurate_than_the_default_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Within the reference check's bound, but past ACCURACY_FACTOR x the default's error:
    refused; a candidate as accurate as the default is kept."""
    real = codegen.generate_kernel
    nudge = {WRONG: "8e-5f", Variant(mr=2, nr=8): "1e-7f"}

    def nudged(sched, kernel, options, variant=None, name=None):  # type: ignore[no-untyped-def]
        text = real(sched, kernel, options, variant, name)
        if variant in nudge:
            text = text.replace(
                "    return err;\n}", f"    out[0] += {nudge[variant]};\n    return err;\n}}"
            )
        return text

    monkeypatch.setattr(codegen, "generate_kernel", nudged)
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (7, 20), DType.F32)
    w = b.const((rng.standard_normal((20, 24)) * 0.1).astype(np.float32), DType.F32)
    sched = schedule(b.build({"y": matmul(b, x, w)}))
    (k,) = [k for k in sched.kernels if k.kind == "contraction"]
    variants = (WRONG, Variant(), Variant(mr=2, nr=8))
    lib = _build(sched, {k.name: variants})
    off, default, close = lib.measure(k, variants, [0, 1, 2], rounds=Rounds(stop_ratio=1e9))
    assert default.ok and close.ok and close.seconds < float("inf")
    assert not off.ok and off.seconds == float("inf")
    assert off.max_error == pytest.approx(8e-5, rel=0.05)  # the reference check alone passes it
    assert off.max_error < 1e-4


def test_winograd_f4_is_refused_where_it_loses_the_direct_convolutions_accuracy() -> None:
    """A 128-channel 3x3 layer: F(4x4) is 8x the direct convolution's error (within the
    reference check's bound), F(2x2) within it; the bench keeps F(2x2) only."""
    from luminal.compiler.backends.cpu import simd, winograd
    from luminal.compiler.frontend.compose import contraction as C

    flags, features = toolchain.feature_flags(detect_cpu())
    if not simd.isa_for(features).name:
        pytest.skip("no vector ISA: Winograd is not offered")
    rng = np.random.default_rng(5)
    b = GraphBuilder()
    x = b.input("x", (1, 128, 12, 12), DType.F32)
    w = (rng.standard_normal((128, 128, 3, 3)) * np.sqrt(2 / (9 * 128))).astype(np.float32)
    y = C.conv(b, x, b.const(w), None, (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    sched = schedule(b.build({"y": y}))
    (k,) = [k for k in sched.kernels if k.kind == "contraction"]
    assert all(winograd.legal(sched, k, impl) for impl in ("winograd", "winograd4"))
    variants = (Variant(), Variant(impl="winograd"), Variant(impl="winograd4"))
    tc = toolchain.find_toolchain()
    feeds = random_inputs(sched.graph.input_specs())
    lib = bench.build(
        sched, codegen.options_for(features, tc.openmp), {k.name: variants}, tc, flags,
        sched.weights_blob(), feeds,
    )  # fmt: skip
    direct, f2, f4 = lib.measure(k, variants, [0, 1, 2], rounds=Rounds(stop_ratio=1e9))
    assert direct.ok and f2.ok and f2.max_error <= direct.max_error * 2
    assert not f4.ok and f4.max_error > tuner.ACCURACY_FACTOR * direct.max_error
    assert f4.max_error < 1e-4  # what the reference check alone would have let through


def test_kendall_tau() -> None:
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau([1, 2, 3], [30, 20, 10]) == -1.0
    assert kendall_tau([1], [1]) is None


def test_cost_model_counts_a_contraction_and_ranks_variants() -> None:
    sched = schedule(mlp_block(layers=1, width=32, batch=4))
    (k,) = [k for k in sched.kernels if k.kind == "contraction"]
    w = costmodel.work(sched, k)
    assert w.flops >= 2 * 4 * 32 * 32  # the multiply-adds, plus the epilogue
    assert w.bytes >= 4 * (4 * 32 + 32 * 32 + 4 * 32)

    big = schedule(mlp_block(layers=1, width=512, batch=17))  # compute-bound
    (k,) = [k for k in big.kernels if k.kind == "contraction"]
    m = Machine(peak_gflops=50, bandwidth_gbs=20, cores=2)

    def est(v: Variant) -> float:
        return costmodel.estimate(m, big, k, v, default_tile=(8, 32))

    # 17 rows: 8-row tiles compute 24, 16-row tiles 32; the library GEMM ranks behind.
    assert est(Variant()) < est(Variant(mr=16, nr=16))
    assert est(Variant()) < est(Variant(impl="blas"))


def test_a_kernel_that_overwrites_its_input_is_measured_on_its_real_input() -> None:
    rng = np.random.default_rng(1)
    b = GraphBuilder()
    x = b.input("x", (9, 32), DType.F32)
    w = b.const(rng.standard_normal((32, 40)).astype(np.float32), DType.F32)
    y = b.unary(Op.EXP2, matmul(b, x, w))
    total = b.reduce(Op.SUM, y, [1])  # a second reader keeps y from fusing as an epilogue
    z = b.binary(Op.ADD, y, b.expand(total, (9, 40)))  # in the arena, over y: y dies here
    z2 = b.binary(Op.MUL, z, z)
    out = b.binary(Op.ADD, z2, b.expand(b.reduce(Op.SUM, z2, [1]), (9, 40)))
    sched = schedule(b.build({"out": out}))
    inplace = [k for k in sched.kernels if k.inplace is not None]
    assert inplace, "the test needs an in-place kernel"
    k = inplace[0]
    variants = (Variant(parallel=False), Variant(parallel=True))
    lib = _build(sched, {k.name: variants})
    timings = lib.measure(k, variants, [0, 1])
    assert all(t.ok for t in timings), timings


@pytest.mark.parametrize("threads", ["1", "2"])
def test_the_pool_reads_a_destination_before_each_timed_call(
    threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lum_share`: another thread of the pool reads the bytes, so that the timed kernel
    finds its destination's lines in the other cores' caches, as in a model run; on one
    thread nobody does.  (The pool's size is read when the library's pool starts.)"""
    import ctypes
    import os

    monkeypatch.setenv("LUMINAL_NUM_THREADS", threads)
    sched = schedule(mlp_block(layers=1))
    k = next(k for k in sched.kernels if k.kind == "contraction")
    lib = _build(sched, {k.name: (Variant(),)})
    region = np.ones(1 << 16, np.uint8)
    share = lib._lib.lum_share
    # the first call starts the pool; on a loaded machine its worker may take longer to
    # come than the caller waits, and then that call's bytes go unread
    readers = [
        share(ctypes.c_void_p(region.ctypes.data), ctypes.c_int64(region.size)) for _ in range(5)
    ]
    if threads == "1":
        assert readers == [0] * 5
    elif len(os.sched_getaffinity(0)) > 1:
        # a worker reads, never the caller (its part only waits); a caller descheduled
        # on a loaded machine may leave both of the 2 parts to the worker
        assert max(readers) >= 1 and set(readers) <= {0, 1, 2}
    (t,) = lib.measure(k, (Variant(),), [0])  # and the timed calls still check out
    assert t.ok and t.seconds > 0


def _padded_depthwise():  # type: ignore[no-untyped-def]
    """Mobilenet's block (`test_unpad._block`), its depthwise convolution reading a pad,
    and this machine's code generation options; skipped without the stencil kernel."""
    from luminal.compiler.backends.cpu import simd, stencil
    from tests.compiler.schedule.test_unpad import _block, _depthwise

    sched = schedule(_block(c=16, h=24, w=24))
    k = _depthwise(sched)
    assert k.fold is not None
    _, features = toolchain.feature_flags(detect_cpu())
    if not stencil.unpad_legal(sched, k, simd.isa_for(features)):
        pytest.skip("no stencil on this machine")
    return sched, k, codegen.options_for(features, toolchain.find_toolchain().openmp)


def _build_with(sched, cg, candidates):  # type: ignore[no-untyped-def]
    flags, _ = toolchain.feature_flags(detect_cpu())
    feeds = random_inputs(sched.graph.input_specs())
    tc = toolchain.find_toolchain()
    return bench.build(sched, cg, candidates, tc, flags, sched.weights_blob(), feeds)


def test_a_kernel_reading_a_pad_is_timed_with_the_pad_unless_it_reads_the_source() -> None:
    """`Kernel.fold`: a variant reading the pad's source (`unpad`) drops the pad's kernel,
    so what reads the pad is timed with the pad's kernel in the timed region, and both
    check out against the reference (the source is alive when the kernel runs)."""
    from luminal.compiler.backends.cpu import stencil

    sched, k, cg = _padded_depthwise()
    variants = (Variant(impl=stencil.IMPL), Variant(impl=stencil.IMPL, unpad=True))
    lib = _build_with(sched, cg, {k.name: variants})
    assert f"{k.name}__pad(" in bench.timing_source(sched, cg, {k.name: variants})
    timings = lib.measure(k, variants, [0, 1], rounds=Rounds(stop_ratio=1e9))
    assert all(t.ok and t.seconds > 0 for t in timings), timings
    # the pad's kernel runs in the timed region of what reads the pad, and only there
    pad = sched.graph.nodes[k.fold.pad]
    home = sched.homes[k.fold.pad].index
    padded = lib.arena[home : home + 4 * int(np.prod(pad.shape))].view(np.float32)
    want = padded.copy()
    position = [x.name for x in sched.kernels].index(k.name)
    restore = (0, np.zeros(1, np.uint8), 0)
    for with_pad in (False, True):
        padded[:] = np.nan
        lib._time(position, 0, 1, *restore, (0, 0), with_pad)
        assert np.isnan(padded).all() != with_pad
    np.testing.assert_array_equal(padded, want)


def test_a_model_run_kernel_by_kernel_computes_the_model() -> None:
    """`time_call` (`search.incontext`'s model runs): every kernel called in order, each
    from the bench that compiled its variant (the depthwise convolution reading its pad's
    source, so the pad's kernel does not run), leaves the model's outputs, as the
    reference interpreter computes them, and a time for each kernel that ran."""
    from luminal.compiler.backends.cpu import stencil
    from luminal.compiler.ir import interpreter
    from luminal.compiler.search.incontext import Compiled, _Run

    sched, k, cg = _padded_depthwise()
    assert k.fold is not None
    lib = _build_with(sched, cg, {k.name: (Variant(),)})
    feeds = {s.name: a for s, a in zip(sched.graph.input_specs(), lib.feeds, strict=True)}
    unpad = Variant(impl=stencil.IMPL, unpad=True)
    more = lib.extended({k.name: (unpad,)}, checked=True)
    for where, index in ((more, -1), (more, 1), (lib, 1)):  # no model code there; too far
        with pytest.raises(ValueError, match="no candidate"):
            where.time_call(k, index)
    first = next(x for x in sched.kernels if x.kind == "contraction")
    with pytest.raises(ValueError, match="no candidate"):
        more.time_call(first, 0)  # a kernel that bench did not compile
    run = _Run(sched, {x.name: (Variant(), Compiled(lib, -1)) for x in sched.kernels})
    want = interpreter.run(sched.graph, feeds)
    for picks in ({}, {k.name: (unpad, Compiled(more, 0))}):
        lib.outs[0][...] = np.nan
        lib.arena[...] = 0xFF  # NaN everywhere: each value read must be written by this run
        seconds = run(picks)
        np.testing.assert_allclose(lib.outs[0], want["o"], rtol=1e-4, atol=1e-4)
        assert (seconds[k.fold.kernel] == 0) == bool(picks)
        assert all(s > 0 for name, s in seconds.items() if name != k.fold.kernel)
