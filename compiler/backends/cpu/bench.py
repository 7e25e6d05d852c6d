"""The CPU tuner's kernel bench: one timing library, real inputs, a check.

Every candidate variant of every kernel being tuned is compiled into ONE shared library
beside the ordinary model (one compiler run, however many candidates), with entry points

    lum_prefix(upto, ...)          run kernels 0..upto-1 in their default variant
    lum_call(k, v, ...)            run kernel k in candidate v (v < 0: the default)
    lum_time(k, v, reps, out, ...) time `reps` calls of it, one clock reading per call
                                   (one call: a step of a model run, `time_call`)

To measure kernel k, the model runs up to k on random inputs, so k reads the values it
reads in production (timing a kernel on garbage can hit denormals or NaNs and lie).  Each
candidate then runs once and its result is compared with the reference interpreter's
value of the kernel's node, then it is timed.  A kernel that writes over its input gets
that input restored before every call, outside the timed region.

Before every timed call, outside the timed region too, the pool's other threads read the
first `SHARE_MAX` bytes of the kernel's destination (`lum_share`): in a model run on
several threads, the arena a kernel writes was last read by kernels on every thread, so
its cache lines sit in the other cores' caches and a write must take each line from them
first.  Timed in a loop on one core, a kernel found its destination in its own cache
alone: on the 2-core Zen 4 benchmark machine a 288-channel pad (14x14 -> 18x18, 373 KB)
took 7 us timed so and 50 us in the model, and the search chose one thread for pads and small
elementwise kernels that ran 2-5x faster on two there (mobilenet_v3_small).

A kernel that may read its pad's source (`Kernel.fold`), measured with a candidate that
does (`Variant.unpad`), is timed in every candidate that reads the pad with the pad's
kernel first inside the timed region (`lum_pads`): the candidate reading the source drops
that kernel from the model, so each is timed for what the model would run.
"""

from __future__ import annotations

import copy
import ctypes
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.backends.cpu.native import aligned, open_library
from luminal.compiler.ir import Graph, numel
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Kernel, Place, Schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant
from luminal.compiler.search.tuner import (
    ROUNDS,
    Rounds,
    Timing,
    accuracy_limit,
    time_interleaved,
)
from luminal.references.parity import Check, agrees

#: Bytes of a kernel's destination the other threads read before each timed call: about
#: one core's L2 (a line beyond it has left that cache by the time the writer comes).
SHARE_MAX = 1 << 20


def timed_with_pad(kernel: Kernel, variants: Sequence[Variant]) -> bool:
    """Whether the variants of `kernel` that read its pad are timed with the pad's kernel
    first (module docstring): it may read the pad's source (`Kernel.fold`) and a variant
    among them does."""
    return kernel.fold is not None and any(v.unpad for v in variants)


def timing_source(
    sched: Schedule,
    options: codegen.CodegenOptions,
    candidates: Mapping[str, Sequence[Variant]],
    model: bool = True,
) -> str:
    """The model's C plus every candidate of the kernels in `candidates` and the timing
    entry points.  Kernels not in `candidates` keep only their default.  Without `model`,
    only the candidates and `lum_call`/`lum_time` (no `lum_prefix`): a library that
    extends one with the model (`TimingLibrary.extended`)."""
    if model:
        parts = [codegen.generate(sched, options)]
    else:
        parts = [codegen.preamble(options)]
    index = {k.name: n for n, k in enumerate(sched.kernels)}
    tables = []
    pads: dict[str, str] = {}  # kernel -> its pad's kernel, timed before what reads the pad
    for name, variants in candidates.items():
        kernel = sched.kernels[index[name]]
        if timed_with_pad(kernel, variants):
            assert kernel.fold is not None
            pad = sched.kernels[index[kernel.fold.kernel]]
            pads[name] = f"{name}__pad"
            parts.append(codegen.generate_kernel(sched, pad, options, None, pads[name]))
        fns = []
        for v, variant in enumerate(variants):
            if model and variant == options.variants.get(name, DEFAULT):
                fns.append(name)  # the model's own function is this candidate
                continue
            fn = f"{name}__v{v}"
            parts.append(codegen.generate_kernel(sched, kernel, options, variant, fn))
            fns.append(fn)
        tables.append(f"static const lum_kfn lum_v_{name}[] = {{{', '.join(fns)}}};")
    n = len(sched.kernels)
    defaults = ", ".join(k.name for k in sched.kernels) if model and n else "0"
    rows = ", ".join(f"lum_v_{k.name}" if k.name in candidates else "0" for k in sched.kernels)
    counts = ", ".join(str(len(candidates.get(k.name, ()))) for k in sched.kernels)
    pad_fns = ", ".join(pads.get(k.name, "0") for k in sched.kernels)
    parts.append(
        "typedef int (*lum_kfn)(uint8_t *, const uint8_t *, void *const *, void *const *);\n"
        + "\n".join(tables)
        + f"\nstatic const lum_kfn lum_defaults[{max(n, 1)}] = {{{defaults}}};\n"
        f"static const lum_kfn *const lum_table[{max(n, 1)}] = {{{rows or '0'}}};\n"
        f"static const int lum_counts[{max(n, 1)}] = {{{counts or '0'}}};\n"
        f"static const lum_kfn lum_pads[{max(n, 1)}] = {{{pad_fns or '0'}}};\n"
        + ("" if model else "#define LUM_NO_MODEL 1\n")
        + _TIMING_C
    )
    return "\n".join(parts)


_TIMING_C = r"""
#include <time.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define LUM_FTZ_ON() unsigned lum_csr = _mm_getcsr(); _mm_setcsr(lum_csr | 0x8040)
#define LUM_FTZ_OFF() _mm_setcsr(lum_csr)
#else
#define LUM_FTZ_ON()
#define LUM_FTZ_OFF()
#endif
static double lum_clock(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static lum_kfn lum_pick(int k, int v) { return v < 0 ? lum_defaults[k] : lum_table[k][v]; }
/* lum_share: the pool's other threads read [at, at + n) (module docstring).  The caller
   takes one chunk and waits there (at most 5 ms) until a worker has read the bytes, so a
   worker, not the caller, reads them; the number of workers that did is returned. */
static const volatile uint8_t *lum_share_at;
static int64_t lum_share_n;
static _Atomic int lum_shared_by;
static _Thread_local int lum_sharing_caller;
static int lum_share_part(int64_t lo, int64_t hi, uint8_t *a, const uint8_t *w, void *const *in, void *const *out) {
    (void)lo; (void)hi; (void)a; (void)w; (void)in; (void)out;
    if (lum_sharing_caller) {
        const double until = lum_clock() + 5e-3;
        while (atomic_load(&lum_shared_by) == 0 && lum_clock() < until) LUM_PAUSE();
        return 0;
    }
    uint8_t sink = 0;
    for (int64_t i = 0; i < lum_share_n; i += 64) sink ^= lum_share_at[i];
    atomic_fetch_add(&lum_shared_by, 1);
    return sink & 0;
}
int lum_share(const uint8_t *at, int64_t n) {
    if (n <= 0 || lum_threads() < 2) return 0;
    lum_share_at = at;
    lum_share_n = n;
    atomic_store(&lum_shared_by, 0);
    lum_sharing_caller = 1;
    lum_parallel(lum_threads(), 1, lum_share_part, 0, 0, 0, 0);
    lum_sharing_caller = 0;
    return atomic_load(&lum_shared_by);
}
int lum_kernel_total(void) { return (int)(sizeof lum_counts / sizeof lum_counts[0]); }
/* whether kernel k's candidate v (v < 0: the model's own code) is in this library */
int lum_has(int k, int v) {
    if (k < 0 || k >= lum_kernel_total()) return 0;
    return v < 0 ? lum_defaults[k] != 0 : v < lum_counts[k];
}
#ifndef LUM_NO_MODEL
int lum_prefix(int upto, uint8_t *arena, const uint8_t *weights, void *const *inputs, void *const *outputs) {
    int err = 0;
    for (int k = 0; k < upto; k++) err |= lum_defaults[k](arena, weights, inputs, outputs);
    return err;
}
#endif
int lum_call(int k, int v, uint8_t *arena, const uint8_t *weights, void *const *inputs, void *const *outputs) {
    return lum_pick(k, v)(arena, weights, inputs, outputs);
}
/* with_pad: the kernel's pad (`lum_pads`) runs first, inside the timed region */
int lum_time(int k, int v, int reps, double *out, uint8_t *arena, const uint8_t *weights,
             void *const *inputs, void *const *outputs, uint8_t *restore_to, const uint8_t *saved, int64_t restore_bytes,
             const uint8_t *share_at, int64_t share_bytes, int with_pad) {
    lum_kfn f = lum_pick(k, v), pad = with_pad ? lum_pads[k] : 0;
    int err = 0;
    LUM_FTZ_ON();
    for (int r = 0; r < reps; r++) {
        if (restore_bytes > 0) memcpy(restore_to, saved, (size_t)restore_bytes);
        lum_share(share_at, share_bytes);
        double t0 = lum_clock();
        if (pad) err |= pad(arena, weights, inputs, outputs);
        err |= f(arena, weights, inputs, outputs);
        out[r] = lum_clock() - t0;
    }
    LUM_FTZ_OFF();
    return err;
}
"""


class TimingLibrary:
    """The compiled timing library, the model's buffers, and reference values.

    `extended(candidates)` builds a library of more candidates alone (without the
    model's code, so it compiles in the time the candidates take) that runs on this
    library's buffers and uses its `lum_prefix`: the search builds one library of the
    defaults first, then candidates batch by batch."""

    def __init__(
        self,
        sched: Schedule,
        library: bytes,
        weights: bytes,
        feeds: Sequence[np.ndarray],
        expected: Mapping[int, np.ndarray],
        build: Callable[[str], bytes] | None = None,
        options: codegen.CodegenOptions | None = None,
    ) -> None:
        self.sched = sched
        self._lib = open_library(library, "the timing library")
        self._prefix = self._lib
        self._build = build
        self._options = options
        for fn in ("lum_prefix", "lum_call"):
            getattr(self._lib, fn).restype = ctypes.c_int
        self._lib.lum_time.restype = ctypes.c_int
        self.arena = aligned(sched.arena_bytes)
        self.weights = aligned(len(weights))
        self.weights[: len(weights)] = np.frombuffer(weights, np.uint8)
        self.feeds = [np.ascontiguousarray(a) for a in feeds]
        self.outs = [np.zeros(s.shape, s.dtype.np) for s in sched.graph.output_specs()]
        self._in = (ctypes.c_void_p * max(len(self.feeds), 1))(*[a.ctypes.data for a in self.feeds])
        self._out = (ctypes.c_void_p * max(len(self.outs), 1))(*[a.ctypes.data for a in self.outs])
        self.expected = expected
        self._position = {k.name: n for n, k in enumerate(sched.kernels)}

    def extended(
        self, candidates: Mapping[str, Sequence[Variant]], checked: bool = False
    ) -> TimingLibrary:
        """A bench of `candidates` on this one's model, buffers and reference values
        (none computed for candidates `checked` already: only run, not measured)."""
        assert self._build is not None and self._options is not None
        by_name = {k.name: k for k in self.sched.kernels}
        missing = [
            by_name[n].node
            for n in candidates
            if not checked and by_name[n].node not in self.expected
        ]
        expected = dict(self.expected)
        if missing:
            specs = self.sched.graph.input_specs()
            feeds = {s.name: a for s, a in zip(specs, self.feeds, strict=True)}
            expected.update(reference_values(self.sched.graph, missing, feeds))
        source = timing_source(self.sched, self._options, candidates, model=False)
        lib = open_library(self._build(source), "the timing library")
        lib.lum_call.restype = ctypes.c_int
        lib.lum_time.restype = ctypes.c_int
        other = copy.copy(self)
        other._lib = lib
        other.expected = expected
        return other

    def _args(self) -> tuple[object, ...]:
        return (
            ctypes.c_void_p(self.arena.ctypes.data),
            ctypes.c_void_p(self.weights.ctypes.data),
            self._in,
            self._out,
        )

    def measure(
        self,
        kernel: Kernel,
        variants: Sequence[Variant],
        order: Sequence[int],
        should_stop: Callable[[], bool] = lambda: False,
        rounds: Rounds = ROUNDS,
    ) -> list[Timing]:
        """Check `variants[i]` for i in `order` (the cost model's ranking) against the
        reference, and against the default's own accuracy (`tuner.accuracy_limit`), then time
        the correct ones in interleaved rounds (`time_interleaved`)."""
        k = self._position[kernel.name]
        self._prefix.lum_prefix(k, *self._args())
        dest = self._view(kernel.dest, kernel.node)
        restore_to, saved, nbytes = self._restore(kernel)
        share = (dest.ctypes.data, min(dest.nbytes, SHARE_MAX))
        expected = self.expected.get(kernel.node)
        checked: dict[int, Timing] = {}
        against = timed_with_pad(kernel, variants)
        with_pad = [against and not variant.unpad for variant in variants]
        verdicts: dict[int, tuple[bool, float]] = {}
        for v in order:
            if nbytes:  # in place: the destination is the input, restored
                ctypes.memmove(restore_to, saved.ctypes.data, nbytes)
            else:  # a candidate that writes nothing must not pass on stale values
                dest[...] = 0
            self._lib.lum_call(k, v, *self._args())
            verdicts[v] = agrees(dest, expected, Check.KERNEL)
        limit = accuracy_limit(verdicts, variants, [] if expected is None else [expected])
        for v in order:
            ok, err = verdicts[v]
            ok = ok and err <= limit
            if ok:
                self._time(k, v, 2, restore_to, saved, nbytes, share, with_pad[v])  # warm-up
            checked[v] = Timing(kernel.name, variants[v], float("inf"), 0, ok, False, err)
        timed = time_interleaved(
            kernel.name,
            checked,
            lambda v, reps: self._time(k, v, reps, restore_to, saved, nbytes, share, with_pad[v]),
            should_stop,
            rounds,
        )
        return [timed[v] for v in order]

    def time_call(self, kernel: Kernel, index: int) -> float:
        """One call of `kernel`'s candidate `index` (-1: the model's own code, in a bench
        built with the model) on the buffers as they are, timed: a step of a model run
        (`search.incontext`), so nothing is restored, shared or checked."""
        k = self._position[kernel.name]
        if not self._lib.lum_has(k, index):
            raise ValueError(f"{kernel.name} has no candidate {index} in this bench")
        buf = (ctypes.c_double * 1)()
        self._lib.lum_time(
            k,
            index,
            1,
            buf,
            *self._args(),
            None,
            None,
            ctypes.c_int64(0),
            None,
            ctypes.c_int64(0),
            ctypes.c_int(0),
        )
        return buf[0]

    def _time(
        self,
        k: int,
        v: int,
        reps: int,
        restore_to: int,
        saved: np.ndarray,
        nbytes: int,
        share: tuple[int, int],
        with_pad: bool,
    ) -> list[float]:
        buf = (ctypes.c_double * reps)()
        self._lib.lum_time(
            k,
            v,
            reps,
            buf,
            *self._args(),
            ctypes.c_void_p(restore_to),
            ctypes.c_void_p(saved.ctypes.data if nbytes else 0),
            ctypes.c_int64(nbytes),
            ctypes.c_void_p(share[0]),
            ctypes.c_int64(share[1]),
            ctypes.c_int(with_pad),
        )
        return list(buf)

    def _view(self, place: Place, node: int) -> np.ndarray:
        n = self.sched.graph.nodes[node]
        if place.kind == "output":
            return self.outs[place.index]
        if place.kind == "arena":
            nbytes = numel(n.shape) * n.dtype.itemsize
            return self.arena[place.index : place.index + nbytes].view(n.dtype.np).reshape(n.shape)
        raise AssertionError(f"kernel writes to {place.kind}")

    def _restore(self, kernel: Kernel) -> tuple[int, np.ndarray, int]:
        """(address, saved copy, bytes) of the buffer an in-place kernel overwrites."""
        if kernel.inplace is None:
            return 0, np.zeros(1, np.uint8), 0
        home = self.sched.homes[kernel.inplace]
        n = self.sched.graph.nodes[kernel.inplace]
        nbytes = numel(n.shape) * n.dtype.itemsize
        region = self.arena[home.index : home.index + nbytes]
        return region.ctypes.data, region.copy(), nbytes


def reference_values(
    graph: Graph, nodes: Sequence[int], feeds: Mapping[str, np.ndarray]
) -> dict[int, np.ndarray]:
    """The reference interpreter's value of each of `nodes`."""
    import dataclasses

    probe = dataclasses.replace(graph, outputs=tuple((f"n{i}", i) for i in dict.fromkeys(nodes)))
    values = reference.run(probe, feeds)
    return {int(name[1:]): v for name, v in values.items()}


def build(
    sched: Schedule,
    options: codegen.CodegenOptions,
    candidates: Mapping[str, Sequence[Variant]],
    tc: toolchain.Toolchain,
    flags: tuple[str, ...],
    weights: bytes,
    feeds: Mapping[str, np.ndarray],
) -> TimingLibrary:
    def compile_(source: str) -> bytes:
        return toolchain.build_shared_library(source, tc, flags)

    library = compile_(timing_source(sched, options, candidates))
    by_name = {k.name: k for k in sched.kernels}
    nodes = [by_name[name].node for name in candidates]
    expected = reference_values(sched.graph, nodes, feeds)
    ordered = [feeds[s.name] for s in sched.graph.input_specs()]
    return TimingLibrary(sched, library, weights, ordered, expected, compile_, options)
