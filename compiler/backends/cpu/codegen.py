"""C code for a schedule: one static function per kernel and one entry point

    int lum_run(uint8_t *arena, const uint8_t *weights, void *const *inputs, void *const *outputs)

that calls them in order and returns non-zero when a gather index was out of range.
Views are index arithmetic (`schedule.indexing`), inlined values are local variables,
and contractions get a register-blocked loop nest with tile sizes MR x NR.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from luminal.compiler.backends.cpu import (
    blas,
    cexpr,
    gemm,
    igemm,
    simd,
    stencil,
    threads,
    winograd,
)
from luminal.compiler.backends.idioms import Idiom, Idioms
from luminal.compiler.ir import DType, Node, Op, TensorSpec
from luminal.compiler.ir.ops import BINARY, UNARY, VIEW
from luminal.compiler.schedule import Kernel, Place, Schedule
from luminal.compiler.schedule.indexing import (
    Index,
    PadCheck,
    loads_of,
    row_major,
    split_loops,
    unflatten,
    view_source,
)
from luminal.compiler.schedule.partition import leaves
from luminal.compiler.schedule.symbolic import Div, Dyn, Lin, Mod, Var
from luminal.compiler.schedule.variant import DEFAULT, Variant

#: Elements (or multiply-adds) below which a kernel stays on one thread.  A kernel on
#: the thread pool (threads.py) costs a claim per chunk and, when the workers slept, a
#: wake-up; measured on the suite (2 cores): 2^16 was best (encoder 18.9 -> 18.3 ms
#: against 2^18, which had suited OpenMP's fork and barrier; 2^14 and 2^15 no better).
PARALLEL_MIN_WORK = 1 << 16

#: f32 outputs of at least this many bytes, read only by elementwise kernels, are written
#: with non-temporal stores (`cexpr`'s `lum_stream_f32`) where a kernel stores whole rows:
#: larger than one core's L2 cache (1-2 MiB on current x86), the output would not stay
#: there for its reader, and a cached store first reads every line it writes.  A matrix
#: product reading it in tiles wants it in cache (convnext_tiny: 0.991x streamed).
STREAM_MIN_BYTES = 2 << 20

#: f32 outputs of at least this many bytes (a server L3: 32 MiB on Zen 3/4 dies) are
#: streamed whoever reads them: no reader finds them cached anyway (mobilenet_v2@8's
#: 38.5 MB expansion read by a depthwise convolution: the model 1.046x).
STREAM_ANY_BYTES = 32 << 20

#: Reductions of at most this many elements per output (pooling windows) are unrolled
#: rather than vectorized along the reduction, so the loop over outputs vectorizes.
SHORT_REDUCTION = 16

#: A reduction across rows (`_KernelWriter._reduce_columns`) accumulates a block of
#: outputs along their row at a time: a divisor of the row, at least half an AVX-512
#: vector and at most this many (a 56-wide map's row whole; a row that is the only output
#: loop in blocks of at most 16, which the threads share).
COLUMN_MIN = 8
COLUMN_BLOCK = 64

#: Side of the square tiles an elementwise kernel that reads a buffer transposed works in
#: (`_KernelWriter._transpose_tiles`): 16 x 16 f32 is 1 KiB, one AVX-512 vector a row.
TRANSPOSE_TILE = 16

#: The variant of such a kernel that works in those tiles: a search alternative, not the
#: rule.  In the kernel bench (Zen 4, AVX-512) Whisper's GELU ran 8x faster tiled and
#: ConvNeXt's permutes into channels-last (an add and a multiply) 1.2-2.9x; without a
#: register transpose (AVX2, portable C) the tile is copied out element by element, and
#: a permute with that little arithmetic measured slower tiled.
TILED_IMPL = "tiled"

#: Writes one output element at a depth, each loop variable replaced as the map says.
_PointWriter = Callable[[list[str], int, dict[Var, Lin]], None]

#: The C function computing a recognized composite (`backends.idioms`): one `vroundps`,
#: vectorized by GCC, where the primitives cost tens of cycles an element (BERT's QDQ
#: quantizes spent more time rounding than multiplying).  `rint` rounds to nearest, ties
#: to even, in the default rounding mode, which the generated code never changes.
_IDIOM_C = {
    (Idiom.ROUND_HALF_EVEN, DType.F32): "rintf",
    (Idiom.ROUND_HALF_EVEN, DType.F64): "rint",
    (Idiom.FLOOR, DType.F32): "floorf",
    (Idiom.FLOOR, DType.F64): "floor",
}


@dataclass(frozen=True)
class CodegenOptions:
    mr: int = 4  # contraction tile rows
    nr: int = 16  # contraction tile columns (a multiple of the vector width)
    fma: bool = True  # accumulate contractions with fused multiply-add
    openmp: bool = True  # parallel kernels on the library's thread pool (threads.py)
    profile: bool = False  # time every kernel into lum_kernel_seconds[]
    simd: str = ""  # vector ISA for f32 micro-kernels (`simd.ISAS`); "" = portable C only
    variants: Mapping[str, Variant] = field(default_factory=dict)  # kernel name -> choice


def preamble(options: CodegenOptions) -> str:
    """What every kernel function needs at file scope: types, the thread pool, the BLAS
    prototypes and the vector macros of the ISA."""
    half = simd.HALF.get(options.simd)
    return "\n".join(
        [
            cexpr.PRELUDE,
            threads.POOL,
            blas.PROTOTYPES,
            simd.ISAS[options.simd].macros(),
            half.macros("H", "lum_hf") if half is not None else "",
        ]
    )


def generate(sched: Schedule, options: CodegenOptions = CodegenOptions()) -> str:
    parts = [preamble(options)]
    for kernel in sched.kernels:
        parts.append(generate_kernel(sched, kernel, options))
    if options.profile:
        # Per-kernel wall time, summed over calls: read lum_kernel_seconds[0..n).
        n = len(sched.kernels)
        parts.append(
            "#include <time.h>\n"
            f"double lum_kernel_seconds[{max(n, 1)}];\nint lum_kernel_count(void) {{ return {n}; }}\n"
            "static double lum_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); "
            "return t.tv_sec + 1e-9 * t.tv_nsec; }\n"
        )
        calls = "    double t0;\n" + "\n".join(
            f"    t0 = lum_now(); err |= {k.name}(arena, weights, inputs, outputs); "
            f"lum_kernel_seconds[{n_}] += lum_now() - t0;"
            for n_, k in enumerate(sched.kernels)
        )
    else:
        calls = "\n".join(
            f"    err |= {k.name}(arena, weights, inputs, outputs);" for k in sched.kernels
        )
    g = sched.graph
    desc = describe(sched.arena_bytes, sched.weights_bytes, g.input_specs(), g.output_specs())
    parts.append(
        "int lum_abi_version(void) { return 1; }\n"
        f'const char *lum_interface(void) {{ return "{desc}"; }}\n\n'
        "int lum_run(uint8_t *arena, const uint8_t *weights, void *const *inputs, void *const *outputs) {\n"
        f"    int err = 0;\n{calls}\n    return err;\n}}\n"
    )
    return "\n".join(parts)


def describe(
    arena_bytes: int,
    weights_bytes: int,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
) -> str:
    """The interface a library reports through `lum_interface()`: what `lum_run` reads and
    writes, so a runtime can refuse a manifest that disagrees before the first run::

        lum-interface/1 arena=BYTES weights=BYTES inputs=f32:24,i64:3 outputs=f32:15

    (each tensor as DTYPE:ELEMENTS, in `lum_run`'s pointer order)."""

    def tensors(specs: Sequence[TensorSpec]) -> str:
        return ",".join(f"{s.dtype.value}:{_numel(s.shape)}" for s in specs) or "-"

    return (
        f"lum-interface/1 arena={arena_bytes} weights={weights_bytes} "
        f"inputs={tensors(inputs)} outputs={tensors(outputs)}"
    )


def options_for(
    features: tuple[str, ...],
    openmp: bool,
    tile_m: int | None = None,
    tile_n: int | None = None,
    **more: object,
) -> CodegenOptions:
    """The options for a library built with these CPU features: the register tile and
    vector ISA they allow (`gemm.default_tile`, `simd.isa_for`), FMA when present."""
    mr, nr = gemm.default_tile(features)
    fields: dict[str, object] = {
        "mr": tile_m or mr,
        "nr": tile_n or nr,
        "fma": "fma" in features,
        "openmp": openmp,
        "simd": simd.isa_for(features).name,
    }
    return CodegenOptions(**{**fields, **more})  # type: ignore[arg-type]


def tiles_legal(sched: Schedule, kernel: Kernel) -> bool:
    """Whether `kernel` is elementwise and reads a buffer transposed, so that it may run
    in square tiles (`Variant(impl=TILED_IMPL)`)."""
    return _KernelWriter(sched, kernel, CodegenOptions(), DEFAULT, kernel.name).tiles_legal()


def generate_kernel(
    sched: Schedule,
    kernel: Kernel,
    options: CodegenOptions,
    variant: Variant | None = None,
    name: str | None = None,
) -> str:
    """One kernel's C function, `static int NAME(arena, weights, inputs, outputs)`, in
    `variant` (default: the one `options.variants` gives the kernel, else the default)."""
    v = variant if variant is not None else options.variants.get(kernel.name, DEFAULT)
    k = kernel.oriented(v.orient)  # the contraction as this variant orients it
    v = dataclasses.replace(v, orient=0)
    return _KernelWriter(sched, k, options, v, name or kernel.name).write()


class _KernelWriter:
    def __init__(
        self, sched: Schedule, kernel: Kernel, options: CodegenOptions, variant: Variant, name: str
    ) -> None:
        self.s = sched
        self.g = sched.graph
        self.k = kernel
        self.o = options
        self.v = variant
        self.name = name
        self.counter = 0
        self.pointers: dict[int, str] = {}
        self.uses_err = False
        self.streamed = False  # a store was non-temporal: the function ends with a fence
        self.helpers: list[str] = []  # file-scope C the function needs (tables, micro-kernels)
        # Set when the outer loop runs on the thread pool: (C expression of its trip
        # count, chunk grain or "0" for automatic); the loop then spans [lum_lo, lum_hi).
        self.pool: tuple[str, str] | None = None
        self.idioms = Idioms(sched.graph)  # composites computed by one C function

    # ---- the function ------------------------------------------------------------------
    def write(self) -> str:
        node = self.g.nodes[self.k.node]
        body: list[str] = []
        if self.k.kind == "contraction":
            self._contraction(body)
        elif self.k.kind == "reduce":
            self._reduce(body)
        elif self.k.kind == "scatter":
            self._scatter(body)
        else:
            self._elementwise(body)
        ptrs = []
        restrict = "" if self.k.inplace is not None else " LUM_RESTRICT"
        out_t = cexpr.ctype(node.dtype, f"{node.op.value} (IR node %{self.k.node})")
        ptrs.append(f"    {out_t} *{restrict} out = ({out_t} *)({self._address(self.k.dest)});")
        for i, name in self.pointers.items():
            t = cexpr.ctype(self.s.dtype(i), f"buffer of IR node %{i}")
            ptrs.append(
                f"    const {t} *{restrict} {name} = (const {t} *)({self._address(self.s.homes[i])});"
            )
        comment = (
            f"/* {self.k.kind}: node %{self.k.node} {node.op.value} -> "
            f"{'x'.join(map(str, node.shape)) or 'scalar'} {node.dtype.value} */\n"
        )
        args = "uint8_t *arena, const uint8_t *weights, void *const *inputs, void *const *outputs"
        unused = "    (void)arena; (void)weights; (void)inputs; (void)outputs;\n    int err = 0;\n"
        fence = "\n    LUM_SFENCE();" if self.streamed else ""
        code = "\n".join(ptrs) + "\n" + "\n".join(body) + fence + "\n    return err;\n}\n"
        helpers = "".join(h + "\n" for h in self.helpers)
        if self.pool is None:
            return helpers + comment + f"static int {self.name}({args}) {{\n" + unused + code
        count, grain = self.pool
        part = (
            f"static int {self.name}_part(int64_t lum_lo, int64_t lum_hi, {args}) {{\n"
            + unused
            + code
        )
        call = (
            f"static int {self.name}({args}) {{\n"
            f"    return lum_parallel({count}, {grain}, {self.name}_part, arena, weights, inputs, outputs);\n}}\n"
        )
        return helpers + comment + part + call

    @property
    def streams(self) -> bool:
        """Whether the output is written past the caches (`STREAM_MIN_BYTES`): when every
        kernel reading it reads it once, in order (elementwise), or it is larger than a
        last-level cache (`STREAM_ANY_BYTES`)."""
        node = self.g.nodes[self.k.node]
        size = _numel(node.shape) * 4
        if node.dtype is not DType.F32 or size < STREAM_MIN_BYTES:
            return False
        return size >= STREAM_ANY_BYTES or all(
            k.kind == "elementwise" for k in self.s.kernels if self.k.node in k.reads
        )

    def _address(self, place: Place) -> str:
        if place.kind == "input":
            return f"inputs[{place.index}]"
        if place.kind == "output":
            return f"outputs[{place.index}]"
        if place.kind == "weight":
            return f"weights + {place.index}"
        return f"arena + {place.index}"

    def _pointer(self, i: int) -> str:
        if i not in self.pointers:
            self.pointers[i] = f"p{i}" if i >= 0 else f"w{-i}"
        return self.pointers[i]

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ---- loops -------------------------------------------------------------------------
    def _loops(self, shape: tuple[int, ...], prefix: str) -> tuple[Index, list[tuple[str, int]]]:
        idx, loops = [], []
        for k, d in enumerate(shape):
            if d == 1:
                idx.append(Lin())
            else:
                name = f"{prefix}{k}"
                idx.append(Lin.of(Var(name, d)))
                loops.append((name, d))
        return tuple(idx), loops

    def _open(
        self, out: list[str], loops: list[tuple[str, int]], depth: int, parallel: bool, work: int
    ) -> int:
        for n, (name, size) in enumerate(loops):
            if n == 0 and parallel and self.pool is None and self._parallel(work):
                self.pool = (str(size), "0")
                out.append(
                    "    " * depth + f"for (int64_t {name} = lum_lo; {name} < lum_hi; {name}++) {{"
                )
            else:
                out.append(
                    "    " * depth + f"for (int64_t {name} = 0; {name} < {size}; {name}++) {{"
                )
            depth += 1
        return depth

    def _parallel(self, work: int) -> bool:
        if not self.o.openmp:
            return False
        if self.v.parallel is not None:
            return self.v.parallel
        return work >= PARALLEL_MIN_WORK

    def _close(self, out: list[str], loops: list[tuple[str, int]], depth: int) -> int:
        for _ in loops:
            depth -= 1
            out.append("    " * depth + "}")
        return depth

    # ---- kernels -------------------------------------------------------------------------
    def _elementwise(self, out: list[str]) -> None:
        node = self.g.nodes[self.k.node]
        pad_of = self._pad_source() if self.k.inplace is None else None
        if pad_of is not None:
            self._pad_rows(out, pad_of)
            return
        idx, loops, interior, top = self._element_loops()
        pair = self._transposed(idx, loops, interior, top) if self.v.impl == TILED_IMPL else None
        if pair is not None:
            self._transpose_tiles(out, idx, loops, pair, top)
            return

        if not interior and len(loops) >= 2 and self._gather_rows(out, idx, loops, top):
            return

        def point(out: list[str], depth: int, at: dict[Var, Lin]) -> None:
            here = _substituted(idx, at)
            body = _Body(self, depth)
            v = body.value(self.k.node, here, top=top)
            out.extend(body.lines)
            out.append("    " * depth + f"out[{row_major(here, node.shape).c()}] = {v};")

        self._output_nest(out, loops, _numel(node.shape), interior, point)

    def _gather_rows(
        self, out: list[str], idx: Index, loops: list[tuple[str, int]], top: bool
    ) -> bool:
        """The output loops with every gather index that is the same along the innermost
        loop looked up, and bounds-checked, before that loop: the loop is then a plain
        (vectorized) copy of rows (an embedding lookup: the index is the token's, the row
        its features).  False, and nothing written, where no gather's index is.  Looked up
        per element, the bounds check's `err` kept GCC's loop scalar: t5@8's 8x128x512
        token embedding took 0.40 ms, once per row 0.08 (ONNX Runtime 0.18)."""
        node = self.g.nodes[self.k.node]
        outer, (name, size) = loops[:-1], loops[-1]
        depth = 1 + len(outer)  # where `_open` leaves the body of the outer loops
        pre = _Body(self, depth)
        body = _Body(self, depth + 1, hoist=pre, inner=Var(name, size))
        v = body.value(self.k.node, idx, top=top)
        if not body.hoisted:
            return False
        opened = self._open(out, outer, 1, True, _numel(node.shape))
        assert opened == depth
        out.extend(pre.lines)
        out.append("    " * depth + f"for (int64_t {name} = 0; {name} < {size}; {name}++) {{")
        out.extend(body.lines)
        out.append("    " * (depth + 1) + f"out[{row_major(idx, node.shape).c()}] = {v};")
        out.append("    " * depth + "}")
        self._close(out, outer, depth)
        return True

    def _element_loops(
        self,
    ) -> tuple[Index, list[tuple[str, int]], dict[str, tuple[int, int]], bool]:
        """An elementwise kernel's output index and loops (views split, the innermost
        merged where the reads allow), the interior range of each loop where a padded read
        needs no bounds check (a pad of a transpose: borders and interior), and whether
        the kernel writes its node's own buffer (`top`)."""
        node = self.g.nodes[self.k.node]
        idx, loops = self._split_views(*self._loops(node.shape, "i"))
        top = self.k.dest == self.s.homes.get(self.k.node)
        interior = self._window_interior(self.k.node, idx, loops[1:], top)
        if not interior:
            idx, loops = self._merged_rows(idx, loops, top)
        return idx, loops, interior, top

    def _merged_rows(
        self, idx: Index, loops: list[tuple[str, int]], top: bool
    ) -> tuple[Index, list[tuple[str, int]]]:
        """The innermost output loops as one, as far as every buffer the kernel reads
        steps through them as one (each offset folds back to the merged variable, no
        division left), so the vector loop runs over a whole map rather than one of its
        rows: a 14x14 map's SE scale ran 14 lanes at a time (mobilenet_v3_small@8's
        8x240x14x14 multiply: 102 us against ONNX Runtime's 58)."""
        shape = self.g.nodes[self.k.node].shape
        probe = _Body(self, 0)
        probe.value(self.k.node, idx, top=top)
        while len(loops) >= 2 and not probe.pad_checks:
            (a, sa), (b, sb) = loops[-2], loops[-1]
            w = Var(f"{a}{b.lstrip('i')}", sa * sb)
            hi, lo = unflatten(Lin.of(w), (sa, sb))
            merged = _substituted(idx, {Var(a, sa): hi, Var(b, sb): lo})
            flats = [*self._flat_reads(merged), row_major(merged, shape)]
            if any(not e.is_affine for e in flats):
                break
            idx, loops = merged, [*loops[:-2], (w.name, w.size)]
        return idx, loops

    def tiles_legal(self) -> bool:
        """Whether this elementwise kernel reads a buffer transposed, so that it can run
        in tiles (`Variant(impl=TILED_IMPL)`)."""
        if self.k.kind != "elementwise" or self._pad_source() is not None:
            return False
        return self._transposed(*self._element_loops()) is not None

    def _transposed(
        self,
        idx: Index,
        loops: list[tuple[str, int]],
        interior: Mapping[str, tuple[int, int]],
        top: bool,
    ) -> tuple[int, int] | None:
        """(j, n) when the output's innermost loop n reads a buffer across its rows (a
        coefficient other than 0 and 1) that another loop j reads along them (coefficient
        1): a transpose, which `_transpose_tiles` writes in square tiles.  Only where every
        read stays affine in the tiled loops, none is padded and the kernel does not write
        over its input."""
        if interior or self.k.inplace is not None:
            return None
        if len(loops) < 2 or loops[-1][1] < TRANSPOSE_TILE:
            return None
        n = len(loops) - 1
        vn = Var(*loops[n])
        if row_major(idx, self.g.nodes[self.k.node].shape).coeff(vn) != 1:
            return None  # the tile's rows are stored as vectors: along the output's rows
        for flat in self._flat_reads(idx):
            if not flat.is_affine or flat.coeff(vn) in (0, 1):
                continue
            for j, (name, size) in enumerate(loops[:n]):
                if size >= TRANSPOSE_TILE and flat.coeff(Var(name, size)) == 1:
                    tiled = _substituted(idx, self._tile_at(loops, j, n))
                    probe = _Body(self, 0)
                    probe.value(self.k.node, tiled, top=top)
                    if probe.pad_checks or not all(f.is_affine for f in self._flat_reads(tiled)):
                        return None
                    return j, n
        return None

    @staticmethod
    def _tile_at(loops: list[tuple[str, int]], j: int, n: int) -> dict[Var, Lin]:
        """Loops j and n as a tile's index (`{name}_t`) and the offset in it (`{name}_e`)."""
        t = TRANSPOSE_TILE
        at = {}
        for k in (j, n):
            name, size = loops[k]
            tiles = -(-size // t)
            at[Var(name, size)] = Lin.of(Var(f"{name}_t", tiles)) * t + Var(f"{name}_e", t)
        return at

    def _transpose_tiles(
        self,
        out: list[str],
        idx: Index,
        loops: list[tuple[str, int]],
        pair: tuple[int, int],
        top: bool,
    ) -> None:
        """An elementwise kernel that reads a buffer transposed, in T x T tiles: each tile
        computed along loop j (the transposed buffer's rows, contiguous) into a local
        array, then stored along the output's rows.  Along the output's rows the reads were
        strided and GCC left the loop scalar: Whisper's GELU of its second convolution,
        read channel-major and written time-major, ran at 9 GFLOP/s (1.6 ms of 48,
        batch 8)."""
        node = self.g.nodes[self.k.node]
        t, (j, n) = TRANSPOSE_TILE, pair
        at = self._tile_at(loops, j, n)
        blocked = [
            (f"{name}_t", -(-size // t)) if k in pair else (name, size)
            for k, (name, size) in enumerate(loops)
        ]
        depth = self._open(out, blocked, 1, True, _numel(node.shape))
        ind = "    " * depth
        ctype = cexpr.ctype(node.dtype, f"{node.op.value} (IR node %{self.k.node})")
        tile = self.fresh("tile")
        out.append(f"{ind}{ctype} {tile}[{t * t}];")
        counts = []
        for k in (j, n):
            name, size = loops[k]
            left = f"{size} - {t}*{name}_t"
            counts.append(f"{name}_c")
            out.append(f"{ind}const int64_t {name}_c = {left} < {t} ? {left} : {t};")
        (jname, _), (nname, _) = loops[j], loops[n]
        out.append(f"{ind}for (int64_t {nname}_e = 0; {nname}_e < {counts[1]}; {nname}_e++) {{")
        out.append(f"{ind}    #pragma omp simd")
        out.append(f"{ind}    for (int64_t {jname}_e = 0; {jname}_e < {counts[0]}; {jname}_e++) {{")
        body = _Body(self, depth + 2)
        v = body.value(self.k.node, _substituted(idx, at), top=top)
        out.extend(body.lines)
        out.append(f"{ind}        {tile}[{t}*{nname}_e + {jname}_e] = {v};")
        out.append(f"{ind}    }}")
        out.append(f"{ind}}}")
        here = row_major(_substituted(idx, at), node.shape).c()
        isa = simd.ISAS.get(self.o.simd)
        if isa is not None and isa.transpose and isa.width == t and node.dtype is DType.F32:
            # 16 rows of the tile transposed in registers, one (masked) store per row
            # of the output
            out.append(f"{ind}lum_vf r[{t}];")
            out.append(f"{ind}for (int64_t n = 0; n < {t}; n++)")
            out.append(
                f"{ind}    r[n] = n < {counts[1]} ? LUM_VLOAD({tile} + {t}*n) : LUM_VZERO();"
            )
            out.append(f"{ind}LUM_VTRANSPOSE(r);")
            out.append(f"{ind}const int64_t {nname}_e = 0;")
            out.append(f"{ind}for (int64_t {jname}_e = 0; {jname}_e < {counts[0]}; {jname}_e++)")
            out.append(f"{ind}    LUM_VSTOREN(&out[{here}], r[{jname}_e], {counts[1]});")
            self._close(out, blocked, depth)
            return
        out.append(f"{ind}for (int64_t {jname}_e = 0; {jname}_e < {counts[0]}; {jname}_e++) {{")
        out.append(f"{ind}    #pragma omp simd")
        out.append(f"{ind}    for (int64_t {nname}_e = 0; {nname}_e < {counts[1]}; {nname}_e++) {{")
        out.append(f"{ind}        out[{here}] = {tile}[{t}*{nname}_e + {jname}_e];")
        out.append(f"{ind}    }}")
        out.append(f"{ind}}}")
        self._close(out, blocked, depth)

    def _split_views(
        self, idx: Index, loops: list[tuple[str, int]]
    ) -> tuple[Index, list[tuple[str, int]]]:
        """Split an output loop v into (v_hi, v_lo) where a buffer is read at `v // d` or
        `v % d` (a reshape of a permute: the attention head merge 1x12x128x64 ->
        1x128x768), so that every read is affine in the loop variables and the innermost
        loop runs over contiguous elements (`indexing.split_loops`, as contractions do).
        Read as written, the head merge divided and took remainders per element and did
        not vectorize: 0.071 ms against 0.0085 ms for an add of the same size."""
        flats = self._flat_reads(idx)
        if not any(isinstance(a, (Div, Mod)) for e in flats for a, _ in e.terms):
            return idx, loops
        names = {name for name, _ in loops}
        vars_ = [a for e in idx for a, _ in e.terms if isinstance(a, Var) and a.name in names]
        split, _, exprs = split_loops(vars_, frozenset(), [*idx, *flats])
        if len(split) == len(vars_):
            return idx, loops
        return tuple(exprs[: len(idx)]), [(v.name, v.size) for v in split]

    def _flat_reads(self, idx: Index, root: int | None = None) -> list[Lin]:
        """The flat index of every buffer the kernel reads computing node `root` (default:
        its own node) at `idx`, through views and inlined elementwise work."""
        mat, flats = self.s.part.materialized, []
        stack, seen = [(self.k.node if root is None else root, idx)], set()
        while stack:  # buffer reads through views, each (node, index) once
            i, at = stack.pop()
            if (i, at) in seen:
                continue
            seen.add((i, at))
            node = self.g.nodes[i]
            if i in mat and i != self.k.node:
                flats.append(row_major(at, node.shape))
            elif node.op in (Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE):
                stack.append(
                    (node.src[0], view_source(node, self.g.nodes[node.src[0]].shape, at)[0])
                )
            elif node.op in BINARY or node.op in UNARY or node.op in (Op.CAST, Op.WHERE):
                stack.extend((s, at) for s in node.src)
            elif node.op is Op.GATHER:
                # The indices are read too; the data is read at a run-time offset along
                # the axis, which is the same for every element of a row, so the row's
                # affinity is the rest of its index (offset 0 stands in for it).
                data, indices = node.src
                ax, rank = node.arg, len(self.g.nodes[indices].shape)
                stack.append((indices, at[ax : ax + rank]))
                stack.append((data, (*at[:ax], Lin(), *at[ax + rank :])))
        return flats

    def _pad_source(self) -> int | None:
        """The buffer a PAD kernel copies, when it reads one directly (through reshapes,
        which keep the element order)."""
        node = self.g.nodes[self.k.node]
        if node.op is not Op.PAD or not node.shape:
            return None
        j = node.src[0]
        while j not in self.s.part.materialized and self.g.nodes[j].op is Op.RESHAPE:
            j = self.g.nodes[j].src[0]
        return j if j in self.s.part.materialized and j not in self.s.part.literals else None

    def _pad_rows(self, out: list[str], buffer: int) -> None:
        """A pad of a buffer, row by row: the fill before, a memcpy, the fill after.  As
        one expression per element it read through clamped indices and did not vectorize
        (a 64x58x58 pad ran at 6 GB/s)."""
        node = self.g.nodes[self.k.node]
        shape, sshape = node.shape, self.g.nodes[node.src[0]].shape
        (widths, fill_value), t = node.arg, cexpr.ctype(node.dtype, "pad")
        fill = cexpr.literal(fill_value, node.dtype)
        outer = [(f"i{k}", d) for k, d in enumerate(shape[:-1]) if d > 1]
        depth = self._open(out, outer, 1, True, _numel(shape))
        ind = "    " * depth
        conds, oterms, sterms = [], [], []
        ostride, sstride = shape[-1], sshape[-1]
        for k in reversed(range(len(shape) - 1)):
            name, (before, after) = (f"i{k}" if shape[k] > 1 else "0"), widths[k]
            if before or after:
                conds.append(f"({name} >= {before} && {name} < {before + sshape[k]})")
            oterms.append(f"{ostride}*{name}")
            sterms.append(f"{sstride}*({name} - {before})")
            ostride *= shape[k]
            sstride *= sshape[k]
        (before, _), length, width = widths[-1], sshape[-1], shape[-1]
        p = self._pointer(buffer)
        out.append(ind + f"{t} *o = out + ({' + '.join(oterms) or '0'});")
        out.append(ind + f"if ({' && '.join(conds) or '1'}) {{")
        out.append(ind + f"    const {t} *s = {p} + ({' + '.join(sterms) or '0'});")
        out.append(ind + f"    for (int64_t j = 0; j < {before}; j++) o[j] = {fill};")
        out.append(ind + f"    memcpy(o + {before}, s, {length} * sizeof({t}));")
        out.append(
            ind + f"    for (int64_t j = {before + length}; j < {width}; j++) o[j] = {fill};"
        )
        out.append(ind + f"}} else for (int64_t j = 0; j < {width}; j++) o[j] = {fill};")
        self._close(out, outer, depth)

    def _store(
        self, out: list[str], depth: int, flat: Lin, value: str, t: str, dest: str | None = None
    ) -> None:
        """Store a reduction's result: straight into `out`, or through the fused epilogue,
        whose reads of the reduction (all at this element) become `value`; into `dest`
        instead of `out` when given (a tile of epilogue values, stored afterwards)."""
        if self.k.reduction is None:
            out.append("    " * depth + f"{dest or f'out[{flat.c()}]'} = ({t}){value};")
            return
        enode = self.g.nodes[self.k.node]
        eidx = unflatten(flat, enode.shape)
        body = _Body(self, depth, {self.k.reduction: f"(({t}){value})"})
        v = body.value(self.k.node, eidx, top=True)
        out.extend(body.lines)
        # `flat` is the element's row-major index in the output: stored there directly
        # (rebuilt from `eidx`, it can keep divisions the simplifier does not undo)
        target = dest or f"out[{flat.c()}]"
        out.append("    " * depth + f"{target} = {v};")

    @property
    def has_epilogue(self) -> bool:
        return self.k.reduction is not None

    def _reduce(self, out: list[str]) -> None:
        node = self.g.nodes[self.k.reduction if self.k.reduction is not None else self.k.node]
        src = self.g.nodes[node.src[0]]
        oidx, oloops = self._loops(node.shape, "i")
        full, rloops, axes = [], [], []
        for k, d in enumerate(src.shape):
            if k in node.arg and d > 1:
                name = f"r{k}"
                full.append(Lin.of(Var(name, d)))
                rloops.append((name, d))
                axes.append(k)
            else:
                full.append(oidx[k])
        merged = self._merged_reduction(node, tuple(full), axes)
        if merged is not None:
            full, rloops = list(merged[0]), [merged[1]]
        # the first loop is the one split across threads: only the loops inside it split
        interior = (
            self._window_interior(node.src[0], tuple(full), oloops[1:]) if _short(rloops) else {}
        )
        block = None if _short(rloops) else self._across_rows(node, tuple(full), oloops, rloops)
        if block is not None:
            self._reduce_columns(out, node, tuple(full), oidx, oloops, rloops, block)
            return

        def point(out: list[str], depth: int, at: dict[Var, Lin]) -> None:
            self._reduce_point(
                out, depth, node, _substituted(tuple(full), at), _substituted(oidx, at), rloops
            )

        self._output_nest(out, oloops, _numel(src.shape), interior, point)

    def _across_rows(
        self,
        node: Node,
        full: Index,
        oloops: list[tuple[str, int]],
        rloops: list[tuple[str, int]],
    ) -> int | None:
        """The block of outputs to accumulate at a time when an f32 sum or max reads its
        input across rows: the innermost reduced loop strides through every buffer it
        reads, which the innermost output loop reads along (LayerNorm over the channels
        of a channel-major map: ConvNeXt's blocks); else None.  Reduced innermost, each
        lane of the SIMD reduction was a load of its own.  The block divides the row, so
        that every index stays exact (the epilogue's included)."""
        if not (rloops and oloops) or node.op not in (Op.SUM, Op.RMAX):
            return None
        if node.dtype is not DType.F32:
            return None
        vr, (name, size) = Var(*rloops[-1]), oloops[-1]
        flats = self._flat_reads(full, node.src[0])
        if not flats or any(
            not f.is_affine or f.coeff(vr) in (0, 1) or f.coeff(Var(name, size)) != 1 for f in flats
        ):
            return None
        probe = _Body(self, 0)
        probe.value(node.src[0], full)
        if probe.pad_checks or probe.gathers:
            return None
        # alone, the row is cut in blocks the threads can share
        top = 2 * COLUMN_MIN if len(oloops) == 1 else COLUMN_BLOCK
        return next((b for b in range(min(size, top), COLUMN_MIN - 1, -1) if size % b == 0), None)

    def _reduce_columns(
        self,
        out: list[str],
        node: Node,
        full: Index,
        oidx: Index,
        oloops: list[tuple[str, int]],
        rloops: list[tuple[str, int]],
        block: int,
    ) -> None:
        """A reduction across rows (`_across_rows`), a block of outputs at a time along
        their row: the block's accumulators in a local array, the reduced loops outside
        and the block's outputs inside, vectorized (each step one contiguous load), then
        the block stored through the epilogue, vectorized too.  ConvNeXt's LayerNorm mean
        and variance over 96 channels of a 56x56 map read each channel's plane in order
        instead of one element from each plane per lane."""
        t = cexpr.ctype(node.dtype, node.op.value)
        name, size = oloops[-1]
        tiles = size // block
        at = {Var(name, size): Lin.of(Var(f"{name}_t", tiles)) * block + Var(f"{name}_e", block)}
        loops = [*oloops[:-1], (f"{name}_t", tiles)]
        depth = self._open(out, loops, 1, True, _numel(self.g.nodes[node.src[0]].shape))
        ind = "    " * depth
        out.append(f"{ind}{_accumulator(node)} acc[{block}];")
        init = cexpr.reduce_init(node.op, node.dtype)
        out.append(f"{ind}for (int64_t {name}_e = 0; {name}_e < {block}; {name}_e++)")
        out.append(f"{ind}    acc[{name}_e] = {init};")
        inner = self._open(out, rloops, depth, False, 0)
        ind = "    " * inner
        out.append(f"{ind}#pragma omp simd")
        out.append(f"{ind}for (int64_t {name}_e = 0; {name}_e < {block}; {name}_e++) {{")
        body = _Body(self, inner + 1)
        v = body.value(node.src[0], _substituted(full, at))
        out.extend(body.lines)
        a = f"acc[{name}_e]"
        out.append(f"{ind}    {a} = {_combine(node, a, v)[0]};")
        out.append(f"{ind}}}")
        self._close(out, rloops, inner)
        ind = "    " * depth
        out.append(f"{ind}#pragma omp simd")
        out.append(f"{ind}for (int64_t {name}_e = 0; {name}_e < {block}; {name}_e++) {{")
        self._store(out, depth + 1, row_major(_substituted(oidx, at), node.shape), a, t)
        out.append(f"{ind}}}")
        self._close(out, loops, depth)

    def _output_nest(
        self,
        out: list[str],
        loops: list[tuple[str, int]],
        work: int,
        interior: Mapping[str, tuple[int, int]],
        point: _PointWriter,
    ) -> None:
        """The loops over a kernel's outputs around `point`: the first one split across
        threads, those inside it in borders and interior where `interior` says."""
        outer = loops[:1] if interior else loops
        depth = self._open(out, outer, 1, True, work)
        self._window_points(out, depth, tuple(loops[1:]) if interior else (), interior, {}, point)
        self._close(out, outer, depth)

    def _window_interior(
        self, src: int, full: Index, loops: Sequence[tuple[str, int]], top: bool = False
    ) -> dict[str, tuple[int, int]]:
        """Per output loop, the range [lo, hi) of its variable where every padded read of
        node `src` at `full` is in bounds (a pooling window's, a pad's), when narrower than
        the loop.  In there the reads need no bounds check and no clamp (`view_source`
        drops the checks that the narrowed ranges prove), so the loop over outputs
        vectorizes; with them, the clamped reads are gathers and GCC left ResNet's 3x3 max
        pool scalar (0.66 ms on one thread against ONNX Runtime's 0.10).  Found from the
        checks the reads keep: a check c*v + rest within [0, size), c > 0, holds for every
        v with c*v + min(rest) >= 0 and c*v + max(rest) < size."""
        probe = _Body(self, 0)
        probe.value(src, full, top=top)
        ranges: dict[str, tuple[int, int]] = {}
        for name, size in loops:
            v = Var(name, size)
            lo, hi = 0, size
            for chk in probe.pad_checks:
                c = chk.expr.coeff(v)
                if c < 0:
                    lo, hi = 0, 0
                elif c > 0:
                    rlo, rhi = (chk.expr + Lin.of(v) * -c).bounds
                    lo, hi = max(lo, -(rlo // c)), min(hi, (chk.size - 1 - rhi) // c + 1)
            if lo < hi and (lo, hi) != (0, size):
                ranges[name] = (lo, hi)
        return ranges

    def _window_points(
        self,
        out: list[str],
        depth: int,
        loops: tuple[tuple[str, int], ...],
        interior: Mapping[str, tuple[int, int]],
        at: dict[Var, Lin],
        point: _PointWriter,
    ) -> None:
        """The loops over outputs, each one with an interior range split in three: the
        border before, the interior (where the loops inside it split too), the border
        after; `point` writes one output element with each loop variable replaced as
        `at` says.  The borders keep their bounds checks."""
        if not loops:
            point(out, depth, at)
            return
        (name, size), rest = loops[0], loops[1:]
        if name not in interior:
            pieces = [(name, 0, size, interior)]
        else:
            lo, hi = interior[name]
            pieces = [(f"{name}_0", 0, lo, {}), (f"{name}_1", lo, hi, interior)]
            pieces.append((f"{name}_2", hi, size, {}))
        for piece, lo, hi, inner in pieces:
            if lo < hi:
                loop = [(piece, hi - lo)]
                d = self._open(out, loop, depth, False, 0)
                here = {**at, Var(name, size): Lin(const=lo) + Var(piece, hi - lo)}
                self._window_points(out, d, rest, inner, here, point)
                self._close(out, loop, d)

    def _merged_reduction(
        self, node: Node, full: Index, axes: list[int]
    ) -> tuple[Index, tuple[str, int]] | None:
        """The reduced axes as one loop, when they are adjacent (but for size-1 axes) and
        every buffer the reduction reads steps through them as one: each of its offsets
        folds back to the merged variable, no division left.  A global average pool over
        7x7 ran as 7 vector loops of 7 lanes each (efficientnet_b0's last BN + SiLU +
        pool: 206 us on one thread, against ONNX Runtime's 24)."""
        shape = self.g.nodes[node.src[0]].shape
        if len(axes) < 2 or any(shape[k] != 1 for k in range(axes[0], axes[-1]) if k not in axes):
            return None
        sizes = tuple(shape[k] for k in axes)
        w = Var("r" + "_".join(map(str, axes)), _numel(sizes))
        parts = dict(zip(axes, unflatten(Lin.of(w), sizes), strict=True))
        merged = tuple(parts.get(k, e) for k, e in enumerate(full))
        mat = self.s.part.materialized
        root = node.src[0]
        targets = [root] if root in mat else leaves(self.g, root, mat)
        for target in targets:
            offsets = loads_of(self.g, mat, root, target, merged)
            if offsets is None or any(
                isinstance(a, (Div, Mod)) for e in offsets for a, _ in e.terms
            ):
                return None
        return merged, (w.name, w.size)

    def _reduce_point(
        self,
        out: list[str],
        depth: int,
        node: Node,
        full: Index,
        oidx: Index,
        rloops: list[tuple[str, int]],
    ) -> None:
        """One output element: accumulator, reduction loops, combine, store."""
        t = cexpr.ctype(node.dtype, node.op.value)
        init = cexpr.reduce_init(node.op, node.dtype)
        out.append("    " * depth + f"{_accumulator(node)} acc = {init};")
        first = len(out)
        depth = self._open(out, rloops[:-1], depth, False, 0)
        inner = len(out)
        depth = self._open(out, rloops[-1:], depth, False, 0)
        body = _Body(self, depth)
        v = body.value(node.src[0], full)
        out.extend(body.lines)
        combine, red = _combine(node, "acc", v)
        out.append("    " * depth + f"acc = {combine};")
        if _short(rloops):
            # A short reduction (a pooling window) is unrolled, so that the loop over the
            # outputs around it is innermost and vectorizes instead.
            for k in reversed(range(first, first + len(rloops))):
                line = out[k]
                out.insert(k, line[: len(line) - len(line.lstrip())] + "#pragma GCC unroll 16")
        elif rloops and node.dtype not in (DType.F16, DType.BF16) and not body.gathers:
            # The innermost reduction loop is a SIMD reduction: partial results per lane,
            # combined at the end.  The order of a sum is not part of its meaning (the
            # interpreter sums pairwise), and f32 sums accumulate in f64 either way.
            out.insert(inner, "    " * (depth - 1) + f"#pragma omp simd reduction({red}:acc)")
        depth = self._close(out, rloops, depth)
        oshape = node.shape
        self._store(out, depth, row_major(oidx, oshape), "acc", t)

    def _scatter(self, out: list[str]) -> None:
        node = self.g.nodes[self.k.node]
        data, indices, updates = node.src
        idx, loops = self._loops(node.shape, "i")
        depth = self._open(out, loops, 1, False, 0)
        body = _Body(self, depth)
        v = body.value(data, idx)
        out.extend(body.lines)
        out.append("    " * depth + f"out[{row_major(idx, node.shape).c()}] = {v};")
        self._close(out, loops, depth)
        ushape = self.g.nodes[updates].shape
        uidx, uloops = self._loops(ushape, "u")
        depth = self._open(out, uloops, 1, False, 0)
        body = _Body(self, depth)
        iv = body.value(indices, uidx)
        uv = body.value(updates, uidx)
        out.extend(body.lines)
        n = node.shape[node.arg]
        g = self.fresh("g")
        self.uses_err = True
        out.append("    " * depth + f"int64_t {g} = (int64_t){iv};")
        out.append("    " * depth + f"if ({g} < 0 || {g} >= {n}) {{ err = 1; {g} = 0; }}")
        target = list(uidx)
        target[node.arg] = Lin.of(Dyn(g, n))
        out.append("    " * depth + f"out[{row_major(tuple(target), node.shape).c()}] = {uv};")
        self._close(out, uloops, depth)

    def _contraction(self, out: list[str]) -> None:
        if self.v.impl == "blas":
            blas.write(self, out)
            return
        if self.v.impl in stencil.IMPLS:
            stencil.write(
                self,
                out,
                simd.ISAS[self.o.simd],
                self.v.impl == stencil.HALF_IMPL,
                self.v.unpad,
                self.v.compact,
            )
            return
        if self.v.impl in winograd.TILE:
            winograd.write(self, out, simd.ISAS[self.o.simd])
            return
        if self.v.impl != "loop" and igemm.legal(self.s, self.k, self.o.simd):
            igemm.write(self, out)  # "loop": the portable loop nest below, for the search
            return
        isa = simd.ISAS[self.o.simd]
        if gemm.supported(self.s, self.k, isa):
            gemm.write(self, out, isa)
            return
        p = self.k.contraction
        assert p is not None
        node = self.g.nodes[self.k.reduction if self.k.reduction is not None else self.k.node]
        cl, m, n = p.loops, p.m, p.n
        (xa, xoff), (ya, yoff) = cl.x, cl.y
        outs = [v for v in cl.loops if v not in cl.reduced]
        t = cexpr.ctype(node.dtype, node.op.value)
        cexpr.computable(node.op, node.dtype)
        # An operand may be stored narrower (an fp16/bf16 weight): converted as it loads.
        xt, yt = (cexpr.ctype(self.s.dtype(b), f"buffer of IR node %{b}") for b in (xa, ya))

        def load(b: int, at: str) -> str:
            have = self.s.dtype(b)
            return at if have is node.dtype else cexpr.cast(have, node.dtype, at)

        mr = (self.v.mr or self.o.mr) if m is not None else 1
        nr = self.v.nr or self.o.nr
        msize = m.size if m is not None else 1
        m0, n0 = Var("m0", msize), Var("n0", n.size)
        sub = {n: Lin.of(n0)}
        if m is not None:
            sub[m] = Lin.of(m0)
        xbase, ybase, obase = xoff.substitute(sub), yoff.substitute(sub), cl.out.substitute(sub)
        cxm = xoff.coeff(m) if m is not None else 0
        cyn = yoff.coeff(n)
        com = cl.out.coeff(m) if m is not None else 0
        con = cl.out.coeff(n)
        px, py = self._pointer(xa), self._pointer(ya)
        outer = [(v.name, v.size) for v in outs if v not in (m, n)]
        rloops = [(v.name, v.size) for v in cl.loops if v in cl.reduced]
        work = 1
        for v in cl.loops:
            work *= v.size
        d = 1
        # the first loop (a batch loop, else the n tiles) runs on the thread pool
        par = self._parallel(work)
        for k, (name, size) in enumerate(outer):
            if k == 0 and par:
                self.pool = (str(size), "0")
                out.append(
                    "    " * d + f"for (int64_t {name} = lum_lo; {name} < lum_hi; {name}++) {{"
                )
            else:
                out.append("    " * d + f"for (int64_t {name} = 0; {name} < {size}; {name}++) {{")
            d += 1
        # n tiles outside m tiles: one NR-wide panel of Y stays in cache while every m tile
        # of X streams past it (Y is usually the larger operand: the weights).
        if par and not outer:
            self.pool = (str(-(-n.size // nr)), "1")
            out.append("    " * d + "for (int64_t nt = lum_lo; nt < lum_hi; nt++) {")
            out.append("    " * d + f"    const int64_t n0 = nt * {nr};")
        else:
            out.append("    " * d + f"for (int64_t n0 = 0; n0 < {n.size}; n0 += {nr}) {{")
        out.append("    " * (d + 1) + f"for (int64_t m0 = 0; m0 < {msize}; m0 += {mr}) {{")
        d += 2
        ind = "    " * d
        acc_t = "float" if node.dtype is DType.F16 else t  # f16 accumulates in f32
        out.append(ind + f"{acc_t} acc[{mr}][{nr}];")
        out.append(
            ind
            + f"for (int mi = 0; mi < {mr}; mi++) for (int ni = 0; ni < {nr}; ni++) acc[mi][ni] = 0;"
        )
        out.append(ind + f"const int64_t mr = {msize} - m0 < {mr} ? {msize} - m0 : {mr};")
        out.append(ind + f"const int64_t nr = {n.size} - n0 < {nr} ? {n.size} - n0 : {nr};")
        # fused multiply-add for floats only: fmaf on an i32 sum rounds it to 24 bits
        fma = ("fma" if node.dtype is DType.F64 else "fmaf") if self.o.fma else None
        fma = fma if node.dtype.is_float else None
        for full in (True, False):
            out.append(ind + (f"if (mr == {mr} && nr == {nr}) {{" if full else "} else {"))
            dd = d + 1
            for name, size in rloops:
                out.append("    " * dd + f"for (int64_t {name} = 0; {name} < {size}; {name}++) {{")
                dd += 1
            i2 = "    " * dd
            out.append(i2 + f"const {xt} *xp = {px} + ({xbase.c()});")
            out.append(i2 + f"const {yt} *yp = {py} + ({ybase.c()});")
            mb, nb = (mr, nr) if full else ("mr", "nr")
            out.append(i2 + f"for (int mi = 0; mi < {mb}; mi++) {{")
            out.append(i2 + f"    const {t} xv = {load(xa, f'xp[mi * {cxm}]')};")
            yv = load(ya, f"yp[ni * {cyn}]")
            update = f"{fma}(xv, {yv}, acc[mi][ni])" if fma else f"acc[mi][ni] + xv * {yv}"
            out.append(i2 + f"    for (int ni = 0; ni < {nb}; ni++) acc[mi][ni] = {update};")
            out.append(i2 + "}")
            for _ in rloops:
                dd -= 1
                out.append("    " * dd + "}")
        out.append(ind + "}")
        if self.k.reduction is None:
            out.append(
                ind + "for (int64_t mi = 0; mi < mr; mi++) for (int64_t ni = 0; ni < nr; ni++) "
                f"out[{obase.c()} + mi * {com} + ni * {con}] = acc[mi][ni];"
            )
        else:  # the epilogue sees the tile element as the original loop variables m and n
            out.append(
                ind + "for (int64_t mi = 0; mi < mr; mi++) for (int64_t ni = 0; ni < nr; ni++) {"
            )
            if m is not None:
                out.append(ind + f"    const int64_t {m.name} = m0 + mi;")
            out.append(ind + f"    const int64_t {n.name} = n0 + ni;")
            self._store(out, d + 1, cl.out, "acc[mi][ni]", t)
            out.append(ind + "}")
        for _ in range(len(outer) + 2):
            d -= 1
            out.append("    " * d + "}")


def _accumulator(node: Node) -> str:
    """The C type a reduction accumulates in: f32 sums in f64, f16 sums in f32."""
    t = cexpr.ctype(node.dtype, node.op.value)
    if node.op is not Op.SUM:
        return t
    return {DType.F32: "double", DType.F16: "float"}.get(node.dtype, t)


def _combine(node: Node, acc: str, v: str) -> tuple[str, str]:
    """A reduction's step, `acc` combined with the value `v`, and its `omp simd`
    reduction operator."""
    if node.dtype is DType.BOOL:
        return f"{acc} | {v}", "|"
    if node.op is Op.SUM:
        return f"{acc} + {v}", "+"
    red = {DType.F32: "lum_maxf", DType.F64: "lum_maxd"}.get(node.dtype, "max")
    return cexpr.binary(Op.MAX, node.dtype, acc, v), red


def _invariant(e: Lin, v: Var) -> bool:
    """Whether `e` is computed from loop variables other than `v` alone (no run-time
    index either: a gather's, which may be defined inside the loop over `v`)."""
    for a, _ in e.terms:
        if isinstance(a, Dyn) or a == v:
            return False
        if isinstance(a, (Div, Mod)) and not _invariant(a.x, v):
            return False
    return True


def _substituted(idx: Index, at: dict[Var, Lin]) -> Index:
    return tuple(e.substitute(at) for e in idx)


def _short(rloops: Sequence[tuple[str, int]]) -> bool:
    """Whether a reduction's loops are a short window (unrolled, outputs vectorized)."""
    return bool(rloops) and _numel(tuple(d for _, d in rloops)) <= SHORT_REDUCTION


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class _Body:
    """Statements computing values at one point of a loop nest, memoized by (node, index)."""

    def __init__(
        self,
        w: _KernelWriter,
        depth: int,
        given: dict[int, str] | None = None,
        hoist: _Body | None = None,
        inner: Var | None = None,
    ) -> None:
        self.w = w
        # Where a gather whose index does not move with loop `inner` looks it up: the body
        # of the loops around that one (`_KernelWriter._gather_rows`).
        self.hoist, self.inner = hoist, inner
        self.hoisted = 0  # gathers looked up in `hoist`
        self.ind = "    " * depth
        self.lines: list[str] = []
        self.memo: dict[tuple[int, Index], str] = {}
        self.given = given or {}  # node -> C expression already holding its value here
        self.pad_checks: list[PadCheck] = []  # the bounds checks the padded reads kept
        self.gathers = 0  # bounds-checked gathers (they set `err`: no SIMD reduction over them)

    def emit(self, t: str, code: str) -> str:
        name = self.w.fresh()
        self.lines.append(f"{self.ind}const {t} {name} = {code};")
        return name

    def value(self, i: int, idx: Index, top: bool = False) -> str:
        key = (i, idx)
        if key in self.memo:
            return self.memo[key]
        result = self._value(i, idx, top)
        self.memo[key] = result
        return result

    def _f16_round_trip(self, i: int) -> int | None:
        """The f32 value that node `i` rounds to fp16 and back (`ir.precision`'s rounding,
        both casts inline here), else None."""
        g, mat = self.w.g, self.w.s.part.materialized
        node = g.nodes[i]
        if node.dtype is not DType.F32 or node.src[0] in mat:
            return None
        inner = g.nodes[node.src[0]]
        if inner.op is not Op.CAST or inner.dtype is not DType.F16:
            return None
        return inner.src[0] if g.nodes[inner.src[0]].dtype is DType.F32 else None

    def _value(self, i: int, idx: Index, top: bool) -> str:
        g, w = self.w.g, self.w
        node = g.nodes[i]
        t = cexpr.ctype(node.dtype, f"{node.op.value} (IR node %{i})")
        if i in self.given:
            return self.given[i]
        if i in w.s.part.literals:
            return cexpr.literal(g.consts[node.arg], node.dtype)
        if i in w.s.part.materialized and not (top and node.op not in (Op.INPUT, Op.CONST)):
            return self.emit(t, f"{w._pointer(i)}[{row_major(idx, node.shape).c()}]")
        if node.op in VIEW:
            src = g.nodes[node.src[0]]
            sidx, checks = view_source(node, src.shape, idx)
            if not checks:
                return self.value(node.src[0], sidx)
            self.pad_checks.extend(checks)
            clamped = list(sidx)
            conds = []
            for k, e in enumerate(sidx):
                for chk in checks:
                    if chk.expr == e and chk.size == src.shape[k]:
                        c = w.fresh("c")
                        self.lines.append(f"{self.ind}const int64_t {c} = {e.c()};")
                        conds.append(f"({c} >= 0 && {c} < {chk.size})")
                        clamped[k] = Lin.of(Dyn(f"lum_clamp({c}, {chk.size - 1})", chk.size))
                        break
            inner = self.value(node.src[0], tuple(clamped))
            fill = cexpr.literal(node.arg[1], node.dtype)
            return self.emit(t, f"({' && '.join(conds)}) ? {inner} : {fill}")
        if node.op is Op.IOTA:
            cexpr.computable(node.op, node.dtype)
            return self.emit(t, f"({t})({idx[node.arg].c()})")
        if node.op is Op.GATHER:
            data, indices = node.src
            rank = len(g.nodes[indices].shape)
            ax = node.arg
            at = idx[ax : ax + rank]
            look = self
            if self.hoist is not None and self.inner is not None:
                if all(_invariant(e, self.inner) for e in at):
                    look = self.hoist
                    self.hoisted += 1
            iv = look.value(indices, at)
            n = g.nodes[data].shape[ax]
            gname = w.fresh("g")
            w.uses_err = True
            look.gathers += 1
            look.lines.append(f"{look.ind}int64_t {gname} = (int64_t){iv};")
            look.lines.append(
                f"{look.ind}if ({gname} < 0 || {gname} >= {n}) {{ err = 1; {gname} = 0; }}"
            )
            didx = (*idx[:ax], Lin.of(Dyn(gname, n)), *idx[ax + rank :])
            return self.value(data, didx)
        if node.op is Op.CAST and (x := self._f16_round_trip(i)) is not None:
            return self.emit(t, f"lum_round_f16({self.value(x, idx)})")
        if node.op is Op.WHERE and (clamp := w.idioms.clamp(i)) is not None:
            lo, hi = (cexpr.literal(v, DType.F32) for v in (clamp.lo, clamp.hi))
            return self.emit(t, f"lum_clampf({self.value(clamp.x, idx)}, {lo}, {hi})")
        if (
            node.op is Op.RECIP
            and (tail := w.idioms.logistic(i)) is not None
            and not set(tail.inner) & w.s.part.materialized
        ):
            return self.emit(t, f"lum_logistic2f({self.value(tail.t, idx)})")
        if node.op is Op.WHERE and (hit := w.idioms.match(i)) is not None:
            return self.emit(t, f"{_IDIOM_C[hit.idiom, node.dtype]}({self.value(hit.x, idx)})")
        args = [self.value(s, idx) for s in node.src]
        if node.op is Op.CAST:
            return self.emit(t, cexpr.cast(g.nodes[node.src[0]].dtype, node.dtype, args[0]))
        if node.op in UNARY:
            return self.emit(t, cexpr.unary(node.op, node.dtype, args[0]))
        if node.op in BINARY:
            return self.emit(t, cexpr.binary(node.op, g.nodes[node.src[0]].dtype, *args))
        if node.op is Op.WHERE:
            return self.emit(t, f"{args[0]} ? {args[1]} : {args[2]}")
        raise AssertionError(f"cannot inline {node.op}")
