"""The generated f32 contraction: packed column panels and an explicit SIMD micro-kernel.

    for each work item (batch index, NR-wide column tile, block of rows)   [thread pool]
        Y's K x NR panel: copied to a thread-local buffer by the first row tile
        for each MR-row tile of the block
            MR x NR accumulators in vector registers, one FMA per (row, vector) per k
            (later tiles: prefetch the next item's panel while they compute)
            store: to the output through the fused epilogue

A Y stored in fp16 or bf16 (`--precision`) is always packed: the copy widens it to f32
(F16C `vcvtph2ps`, or a 16-bit shift for bf16, where GCC vectorizes it), once per panel,
and the micro-kernel never sees the narrow type.

The copy makes the micro-kernel's reads of Y sequential whatever Y's strides (a weight
read along N with a 12 KiB row stride maps every row to one L1 set; an attention key
matrix is read transposed).  Unit-stride panels are copied by the first row tile while it
computes from the source (prefetched `PREFETCH_ROWS` ahead), other panels are gathered
first, and a column tile with a single row tile reads the source in place.  Rows are the
flattened output positions (`gemm_layout`), balanced into tiles: a 7x7 convolution
output is seven full tiles of 7 rows, not six of 8 and a latency-bound tile of 1.  The
reduction may be blocked (`kc`): partial sums then wait in a thread-local buffer between
K blocks and only the last block runs the epilogue.

Work items are ordered column tile major and, where the next panel is prefetched, each
thread claims one run of consecutive items (`threads.py`): it reads its own part of the
weights, once, while computing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from luminal.compiler.backends.cpu import cexpr, gemm_slab
from luminal.compiler.backends.cpu.gemm_layout import Axis, GemmLayout, GemmShape
from luminal.compiler.backends.cpu.simd import Isa, isa_for
from luminal.compiler.ir import DType, numel
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.symbolic import Lin, Var

if TYPE_CHECKING:
    from luminal.compiler.backends.cpu.codegen import _KernelWriter

#: Work items to aim for when splitting rows into blocks: enough that 2-8 threads
#: claiming them stay evenly busy.  Splitting rows costs one more pack of the Y panel per
#: block (K x NR copies against M x K x NR multiply-adds), so blocks stay >= 4 tiles
#: (but see `FEW_ITEMS`).
MIN_ITEMS = 16

#: Work items below which the row blocks are chosen for an even split across threads
#: (`BALANCED_THREADS`) rather than at `MIN_ITEMS`, down to blocks of 2 tiles: 960 -> 160
#: channels at 7x7 (mobilenet_v2) is 5 column tiles of 49 rows, 3 items on one of two
#: threads and 2 on the other, and as 10 items 112 -> 91 us on 2 threads.  On one thread
#: the extra blocks cost nothing measurable (those kernels 0.145 ms either way; choosing
#: the blocks at run time by the pool's size: mobilenet_v2 1.006x [0.986-1.026]).
FEW_ITEMS = 8

#: The thread counts an item count is balanced for (each weighs alike).
BALANCED_THREADS = (2, 4)

#: How many rows of Y ahead the micro-kernel prefetches while it reads Y in place:
#: a row takes ~16 cycles of FMAs, so 16 rows cover ~80 ns of memory latency (8, 16, 24
#: and 48 measured within 4% of each other; none at all was 20% slower on 3x3x512
#: convolutions).
PREFETCH_ROWS = 16

#: Largest K x NR panel (floats) kept in thread-local memory without K blocking: 4 MiB,
#: above any suite layer (a 3x3x512 convolution's is 4608 x 32).
MAX_PANEL = 1 << 20


def row_block(m: int, tiles: int, mr: int, others: int) -> int:
    """Rows per block (a multiple of `mr`) for `m` rows in `tiles` row tiles, beside
    `others` items (column tiles x batch): blocks of at least 4 tiles, as many as bring
    the items to `MIN_ITEMS`; where that leaves fewer than `FEW_ITEMS` items, the blocks
    (of at least 2 tiles) that split them most evenly over `BALANCED_THREADS`, the fewest
    on a tie (each block packs the Y panel once more)."""

    def rows(mb: int) -> int:
        return -(-tiles // mb) * mr

    def items(mb: int) -> int:
        return others * -(-m // rows(mb))

    def balance(mb: int) -> float:
        n = items(mb)
        return sum(n / (t * -(-n // t)) for t in BALANCED_THREADS)

    want = max(1, -(-MIN_ITEMS // others))
    mb = max(1, min(want, tiles // 4))
    if items(mb) < FEW_ITEMS:
        mb = max(range(mb, max(mb, min(want, tiles // 2)) + 1), key=lambda b: (balance(b), -b))
    return rows(mb)


def default_tile(features: tuple[str, ...]) -> tuple[int, int]:
    """(MR, NR) when the variant does not say: 8 x 32 with AVX-512 (16 zmm accumulators
    of 32), 6 x 16 with AVX2 (12 ymm of 16).  Measured on this machine's AVX-512 cores
    (suite matmuls and convolutions, one thread): 8 x 32 ran at 100-112 GFLOP/s, within
    3% of the best other tile on all but the 7x7 convolutions (12 x 32: +5%)."""
    isa = isa_for(features)
    if isa.width == 16:
        return 8, 32
    if isa.width == 8:
        return 6, 16
    return 4, 8


def tiles(features: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """Register tiles worth timing, in the order the candidates keep them: each fits the
    vector registers (MR x NR/width accumulators, NR/width loaded vectors and one
    broadcast).  14 x 32 fills all 32 zmm registers (28 chains): on a core with two
    full-width 512-bit FMA units it ran batch-8 3x3 convolutions 1-7% faster than the
    best other tile (a 56-row map is four whole tiles), and bert's 128 x 768 x 3072
    product 2% faster; where it loses, the bench says so."""
    isa = isa_for(features)
    if isa.width == 16:
        return ((8, 32), (14, 32), (12, 32), (6, 64), (4, 64), (16, 16))
    if isa.width == 8:
        return ((6, 16), (4, 24), (8, 8), (4, 16))
    return ((4, 8),)


def supported(sched: Schedule, kernel: Kernel, isa: Isa) -> bool:
    """f32 contractions on a vector ISA, Y also in fp16 or bf16 (a reduced-precision
    weight, widened to f32 as its panel is packed); everything else takes the portable
    loop nest."""
    p = kernel.contraction
    if not isa.name or p is None:
        return False
    node = sched.graph.nodes[kernel.reduction if kernel.reduction is not None else kernel.node]
    return (
        node.dtype is DType.F32
        and sched.dtype(p.loops.x[0]) is DType.F32
        and sched.dtype(p.loops.y[0]) in (DType.F32, DType.F16, DType.BF16)
    )


def unpad_legal(sched: Schedule, kernel: Kernel, features: tuple[str, ...]) -> bool:
    """Whether the generated kernel may build its padded input itself (`Variant.unpad`,
    `gemm_slab`): a supported contraction whose X is a pad it may skip, read as a
    convolution's window, with its whole K in one panel."""
    return _slab_legal(sched, kernel, features, compact=False)


def compact_legal(sched: Schedule, kernel: Kernel, features: tuple[str, ...]) -> bool:
    """Whether the generated kernel may pack its strided X per band (`Variant.compact`,
    `gemm_slab`): a supported contraction reading X as a 1x1 convolution with a stride,
    with its whole K in one panel."""
    return _slab_legal(sched, kernel, features, compact=True)


def _slab_legal(sched: Schedule, kernel: Kernel, features: tuple[str, ...], compact: bool) -> bool:
    p = kernel.contraction
    if p is None or not supported(sched, kernel, isa_for(features)):
        return False
    shape = GemmShape.of(p)
    if shape.k * max(nr for _, nr in tiles(features)) > MAX_PANEL:
        return False  # K blocked: partial sums would outlive the band's slab
    return gemm_slab.plan(sched, kernel, 1, shape.batch, compact=compact) is not None


def f32_contraction(sched: Schedule, kernel: Kernel) -> bool:
    """A contraction of f32 operands into an f32 result (what the vector kernels take)."""
    p = kernel.contraction
    if p is None:
        return False
    node = sched.graph.nodes[kernel.reduction if kernel.reduction is not None else kernel.node]
    return (
        node.dtype is DType.F32
        and sched.dtype(p.loops.x[0]) is DType.F32
        and sched.dtype(p.loops.y[0]) is DType.F32
    )


def k_offsets(w: _KernelWriter, axis: Axis, offset: Lin, tag: str) -> str:
    """C expression for `offset`'s part along the reduction `axis` at flat index `k`: a
    constant stride when the reduced variables merge (a matmul, a 1x1 convolution), else a
    table of offsets written as a helper (a 3x3 convolution's (cin, kh, kw))."""
    stride = axis.stride(offset)
    if stride is not None:
        return f"k * {stride}" if stride else "0"
    table = axis.offsets(offset)
    name = f"{w.name}_{tag}"
    t = "int32_t" if max(map(abs, table), default=0) < 2**31 else "int64_t"
    w.helpers.append(f"static const {t} {name}[{len(table)}] = {{{', '.join(map(str, table))}}};")
    return f"{name}[k]"


def write(w: _KernelWriter, out: list[str], isa: Isa) -> None:
    _Gemm(w, isa).write(out)


class _Gemm:
    #: C type of the accumulator tile the store reads
    acc_t = "float"

    def __init__(self, w: _KernelWriter, isa: Isa, tile: tuple[int, int] | None = None) -> None:
        p = w.k.contraction
        assert p is not None
        self.w = w
        self.isa = isa
        self.made: set[str] = set()  # micro-kernel helpers already written
        self.lay = GemmLayout.of(p)
        shape = GemmShape.of(p)
        self.M, self.N, self.K, self.B = shape.m, shape.n, shape.k, shape.batch
        vw = isa.width
        mr, nr = tile or (w.v.mr or w.o.mr, w.v.nr or w.o.nr)
        # Balanced row tiles: 49 rows in tiles of 8 would leave a 1-row tail (two FMA
        # chains, latency-bound); 7 tiles of 7 keep every tile wide.
        tiles_m = -(-self.M // max(1, min(mr, self.M)))
        self.MR = -(-self.M // tiles_m)
        self.NR = max(vw, -(-nr // vw) * vw)
        self.NV = self.NR // vw
        self.NT = -(-self.N // self.NR)
        self.MC = row_block(self.M, tiles_m, self.MR, self.B * self.NT)  # rows per block
        self.MB = -(-self.M // self.MC)
        kc = w.v.kc
        if kc is None and self.K * self.NR > MAX_PANEL:
            kc = MAX_PANEL // self.NR
        self.KC = kc if kc is not None and kc < self.K else self.K
        # `unpad`, `compact`: rows in bands of whole output rows, each building its input
        self.slab = None
        if w.v.unpad or w.v.compact:
            self.slab = gemm_slab.plan(w.s, w.k, self.NT, self.B, compact=w.v.compact)
            assert self.slab is not None and self.KC == self.K, "unpad_legal, compact_legal"
            band_rows = self.slab.band * self.slab.ow.size
            tiles_b = -(-band_rows // max(1, min(mr, band_rows)))
            self.MR = -(-band_rows // tiles_b)

    # ---- pieces of C ---------------------------------------------------------------------
    def _decl(self, axis: Axis, flat: str, ind: str) -> list[str]:
        return [f"{ind}const int64_t {v.name} = {e};" for v, e in axis.unflatten(flat)]

    def _koff(self, offset: Lin, tag: str) -> str:
        return k_offsets(self.w, self.lay.k, offset, tag)

    # ---- the kernel ----------------------------------------------------------------------
    def write(self, out: list[str]) -> None:
        w, lay, isa = self.w, self.lay, self.isa
        M, N, K, MR, NR, VW = self.M, self.N, self.K, self.MR, self.NR, isa.width
        (xb, xoff), (yb, yoff) = lay.x, lay.y
        slab = self.slab
        py = w._pointer(yb)
        n = lay.n
        if slab is None:
            px = w._pointer(xb)
            xk = self._koff(xoff, "xk")
        else:  # the convolution's offsets, re-based to the slab
            xk = f"{w.name}_sk[k]"
            w.helpers.append(
                f"static const int32_t {w.name}_sk[{len(slab.table)}] = "
                f"{{{', '.join(map(str, slab.table))}}};"
            )
        yk = self._koff(yoff, "yk")
        xbase = lay.without(xoff, lay.k)  # batch and row variables
        ybase = lay.without(yoff, lay.k, n)  # batch variables
        yn = yoff.coeff(n)
        ysk = lay.k.stride(yoff)
        blocked = self.KC < K
        # thread-local panel (and partial sums when K is blocked)
        out.append(
            f"    static _Thread_local float ypack[{self.KC * NR}] __attribute__((aligned(64)));"
        )
        if blocked:
            out.append(
                f"    static _Thread_local float part[{self.MC * NR}] __attribute__((aligned(64)));"
            )
        if slab is not None:
            out.append(
                f"    static _Thread_local float slab[{slab.floats}] __attribute__((aligned(64)));"
            )
            out.append("    int64_t slab_at = -1;  /* the (batch, band) the slab holds */")
        # row blocks: a slab's bands of whole output rows per outer row index, else MB
        blocks = slab.bands * (M // (slab.oh.size * slab.ow.size)) if slab else self.MB
        items = self.B * self.NT * blocks
        work = self.B * M * N * K
        # a narrow Y is widened into the panel: never read in place
        through = yn == 1 and ysk is not None and w.s.dtype(yb) is DType.F32
        direct = slab is None and self.MC >= M and M <= MR  # one row tile: no reuse
        # With one row tile, the last column tile of an N that is not a multiple of NR
        # reads Y in place too, its last vector masked, rather than from a zero-padded
        # copy that nothing reuses.  A matrix-vector product's 40-wide weight panels
        # (ImageNet's 1000 classes) were a 32-wide tile read in place and an 8-wide one
        # copied 32 wide, 1280 rows per panel: 89 -> 61 us for 1280 x 1000, 2 threads.
        nt_tail = N % NR
        nv_tail = -(-nt_tail // VW) if nt_tail else 0
        masked = through and direct and nv_tail > 0 and bool(isa.loadn)
        lanes = nt_tail % VW if masked and nt_tail % VW else None
        # While a column tile's later row tiles compute from the packed copy, the next
        # column tile's Y is prefetched (when the same thread computes it: items are
        # claimed in runs), so its first row tile does not wait on memory.
        ahead = through and not blocked and not direct and self.NT > 1
        ahead = ahead and (slab is not None or self.MB == 1)
        if items > 1 and w._parallel(work):
            # Items are coarse, so one per claim balances well.  With the prefetch, a
            # thread needs a run of consecutive items (all but the run's first item have
            # their panel prefetched): one run per thread.  Measured, 2 threads: 3x3x512
            # convolutions 150 -> 195 GFLOP/s and gpt 12.6 -> 9.8 ms against pairs of
            # items; guided runs (long first, short to balance) were 8% slower quiet and
            # 7% faster with another process spinning on one core.
            per = "(" + f"{items} + lum_threads() - 1) / lum_threads()"
            # a slab is built once per run for all of its band's column tiles
            runs = ahead or (slab is not None and self.NT > 1)
            grain = per if runs and items >= 8 else "1"
            w.pool = (str(items), grain)
            out.append("    for (int64_t t = lum_lo; t < lum_hi; t++) {")
        else:
            out.append("    const int64_t lum_hi = " + f"{items};")
            out.append(f"    for (int64_t t = 0; t < {items}; t++) {{")
        i2 = "        "
        if slab is None:
            self._item(out, i2)
        else:  # column tiles innermost: a thread's run shares its bands' slabs
            self._band(out, i2, slab, blocks)
        out.append(i2 + f"const int64_t n0 = nt * {NR};")
        out.append(i2 + f"const int64_t nr = {N} - n0 < {NR} ? {N} - n0 : {NR};")
        if blocked:
            out.append(i2 + f"for (int64_t kb = 0; kb < {K}; kb += {self.KC}) {{")
            i2 += "    "
            out.append(i2 + f"const int64_t kn = {K} - kb < {self.KC} ? {K} - kb : {self.KC};")
            kfrom, kcount = "kb", "kn"
        else:
            kfrom, kcount = "0", str(K)
        # Y panel: read in place (a single row tile), copied while the first row tile
        # computes (unit-stride columns), or gathered into the buffer first
        ysrc = f"{py} + ({ybase.c()}) + n0 * {yn}"
        out.append(i2 + "const float *yp; int64_t ys; float *pk;")
        if ahead:
            out.append(
                i2 + f"const float *pf = t + 1 < lum_hi && nt + 1 < {self.NT} ? {ysrc} + {NR} : 0;"
            )
            out.append(i2 + "int64_t pfrow = 0;")
        if through:
            first = "0" if direct else "ypack"
            out.append(
                i2
                + f"if (nr == {NR}) {{ yp = {ysrc} + {kfrom} * {ysk}; ys = {ysk}; pk = {first}; }}"
            )
            if masked:  # the last, narrower column tile reads in place too
                out.append(i2 + f"else {{ yp = {ysrc} + {kfrom} * {ysk}; ys = {ysk}; pk = 0; }}")
            else:
                out.append(i2 + "else {")
                self._pack(out, i2 + "    ", ysrc, yk, yn, ysk, kfrom, kcount)
                out.append(i2 + f"    yp = ypack; ys = {NR}; pk = 0;")
                out.append(i2 + "}")
        else:
            self._pack(out, i2, ysrc, yk, yn, ysk, kfrom, kcount)
            out.append(i2 + f"yp = ypack; ys = {NR}; pk = 0;")
        # row tiles
        out.append(i2 + f"for (int64_t m0 = mlo; m0 < mhi; m0 += {MR}) {{")
        i3 = i2 + "    "
        out.append(i3 + f"const int64_t mr = mhi - m0 < {MR} ? mhi - m0 : {MR};")
        out.append(i3 + f"const float *xr[{MR}];")
        out.append(i3 + f"for (int64_t i = 0; i < {MR}; i++) {{")
        if slab is None:
            out.append(i3 + f"    const int64_t r = m0 + i < {M} ? m0 + i : {M - 1};")
            out.extend(self._decl(lay.rows, "r", i3 + "    "))
            out.append(i3 + f"    xr[i] = {px} + ({xbase.c()});")
        else:  # a short last tile repeats the band's last position
            out.append(i3 + "    const int64_t r = m0 + i < mhi ? m0 + i : mhi - 1;")
            out.extend(self._decl(lay.rows, "r", i3 + "    "))
            at = slab.position(slab.oh.name, "oh0", slab.ow.name)
            out.append(i3 + f"    xr[i] = slab + {at};")
        out.append(i3 + "}")
        if blocked:
            out.append(i3 + "float *pt = part + (m0 - mlo) * " + f"{NR};")
        out.append(i3 + f"float tile[{MR * NR}] __attribute__((aligned(64)));")
        # blocks are whole tiles, so only the last one can be short; a band's short
        # tile computes MR rows (its missing rows repeat a position)
        m_tail = M % MR if slab is None else 0
        full_rows = f"mr == {MR} && " if slab is None else ""
        shapes = [(MR, self.NV, None, f"{full_rows}nr == {NR}", None)]
        # A full tile whose rows are one stride apart in X (a matmul's rows, positions
        # along one output row) reads them from one pointer at constant displacements:
        # MR row pointers (14 in a 14 x 32 tile) did not fit the integer registers
        # beside the loop's own, and GCC reloaded the spilled ones every k.
        rs, uniform = self._row_stride(xbase)
        if rs is not None and MR > 1:
            if not uniform:
                out.append(i3 + "int uni = 1;")
                out.append(
                    i3 + f"for (int64_t i = 1; i < {MR}; i++) uni &= xr[i] == xr[0] + i * {rs};"
                )
            strided = (MR, self.NV, None, shapes[0][3] + ("" if uniform else " && uni"), rs)
            shapes = [strided] + ([] if uniform else shapes)
        if nv_tail:
            shapes.append((MR, nv_tail, lanes, f"mr == {MR}" if slab is None else "1", None))
        if m_tail:
            shapes.append((m_tail, self.NV, None, f"nr == {NR}", None))
            if nv_tail:
                shapes.append((m_tail, nv_tail, lanes, "1", None))
        init = "kb ? pt : 0" if blocked else "0"
        lines = -(-NR // 16)  # cache lines per row of Y
        if ahead:
            out.append(
                i3 + f"const float *pfn = pk == 0 && pf && pfrow < {K} ? pf + pfrow * {ysk} : 0;"
            )
        for k, (rows, nv, last, cond, step) in enumerate(shapes):
            fn = self._micro(rows, nv, xk, ysk if ahead else None, last, step)
            head = "if" if k == 0 else "else if"
            pfarg = ", pfn" if ahead else ""
            out.append(
                i3
                + f"{head} ({cond}) {fn}(xr, yp, ys, {kfrom}, {kcount}, tile, {init}, pk{pfarg});"
            )
        if ahead:
            out.append(i3 + f"if (pfn) pfrow += {K // lines};")
        out.append(i3 + f"if (pk) {{ yp = ypack; ys = {NR}; pk = 0; }}")
        # store: partial sums, or the final values through the epilogue
        if blocked:
            out.append(i3 + f"if (kb + kn < {K}) {{")
            out.append(i3 + f"    for (int64_t e = 0; e < {MR * NR}; e++) pt[e] = tile[e];")
            out.append(i3 + "    continue;")
            out.append(i3 + "}")
        self._store(out, i3)
        out.append(i2 + "}")
        if blocked:
            i2 = i2[:-4]
            out.append(i2 + "}")
        out.append("    }")

    def _row_stride(self, xbase: Lin) -> tuple[int | None, bool]:
        """The step between a full tile's consecutive rows in X, and whether every full
        tile's rows are that step apart (else the call site checks, per tile: a tile
        crossing an output row, or a band's short tile repeating its last position)."""
        if self.slab is not None:
            return (1 if self.slab.compact else self.slab.col_step), False
        rows = self.lay.rows
        if not rows.vars:
            return None, False
        uniform = rows.stride(xbase)
        if uniform and all(isinstance(a, Var) for a, _ in xbase.terms):
            return uniform, True
        step = xbase.coeff(rows.vars[-1])
        return (step or None), False

    def _item(self, out: list[str], ind: str) -> None:
        """Work item `t`'s batch index `bi`, column tile `nt` and row block `mb`, rows
        [mlo, mhi): items run batch, column tile, then row block."""
        NT, MB, MC, M = self.NT, self.MB, self.MC, self.M
        out.append(ind + f"const int64_t bi = t / {NT * MB};")
        out.append(ind + f"const int64_t nt = (t / {MB}) % {NT};")
        out.append(ind + f"const int64_t mb = t % {MB};")
        out.append(ind + "(void)bi; (void)mb;")
        out.extend(self._decl(self.lay.batch, "bi", ind))
        out.append(ind + f"const int64_t mlo = mb * {MC};")
        out.append(ind + f"const int64_t mhi = mlo + {MC} < {M} ? mlo + {MC} : {M};")

    def _band(self, out: list[str], ind: str, slab: gemm_slab.Slab, blocks: int) -> None:
        """The item's batch index, band (rows [mlo, mhi)) and column tile, and its band's
        slab built when the last item's band was another."""
        NT, lay = self.NT, self.lay
        per = slab.oh.size * slab.ow.size  # rows per outer row index
        outer = Axis(lay.rows.vars[:-2])
        out.append(ind + f"const int64_t bi = t / {blocks * NT};")
        out.append(ind + f"const int64_t ob = (t / {NT}) % {blocks};")
        out.append(ind + f"const int64_t nt = t % {NT};")
        out.append(
            ind + f"const int64_t oq = ob / {slab.bands}, oh0 = (ob % {slab.bands}) * {slab.band};"
        )
        out.append(ind + "(void)bi; (void)oq;")
        out.extend(self._decl(lay.batch, "bi", ind))
        out.append(ind + f"const int64_t mlo = oq * {per} + oh0 * {slab.ow.size};")
        out.append(
            ind + f"const int64_t mhi = mlo + (oh0 + {slab.band} < {slab.oh.size} ? "
            f"{slab.band} : {slab.oh.size} - oh0) * {slab.ow.size};"
        )
        out.append(ind + f"if (slab_at != t / {NT}) {{")
        out.append(ind + f"    slab_at = t / {NT};")
        out.extend(self._decl(outer, "oq", ind + "    "))
        out.append(ind + f"    const int64_t plane = {slab.plane_terms.c()};")
        gemm_slab.fill(self.w, slab, out, ind + "    ", "plane", "oh0")
        out.append(ind + "}")

    def _pack(
        self,
        out: list[str],
        ind: str,
        ysrc: str,
        yk: str,
        yn: int,
        ysk: int | None,
        kfrom: str,
        kcount: str,
    ) -> None:
        NR = self.NR
        have = self.w.s.dtype(self.lay.y[0])
        t = cexpr.ctype(have, "gemm operand")

        def load(at: str) -> str:  # a narrow weight widens as it is copied
            return at if have is DType.F32 else cexpr.cast(have, DType.F32, at)

        start = "0"
        if ysk == 1 and yn != 1 and have is DType.F32:
            start = self._pack_transposed(out, ind, ysrc, yn, kfrom, kcount)
        out.append(ind + f"for (int64_t kk = {start}; kk < {kcount}; kk++) {{")
        out.append(ind + f"    const int64_t k = {kfrom} + kk;")
        out.append(ind + f"    const {t} *src = {ysrc} + {yk};")
        out.append(ind + f"    float *dst = ypack + kk * {NR};")
        if yn == 1 and have is DType.F16:
            # GCC 12 converts _Float16 one element at a time: F16C eight at a time.
            widen = self._widen_f16()
            out.append(ind + f"    if (nr == {NR}) {widen}(dst, src, {NR});")
            out.append(
                ind
                + f"    else {{ for (int64_t j = 0; j < {NR}; j++) dst[j] = j < nr ? {load('src[j]')} : 0.0f; }}"
            )
        elif yn == 1:
            out.append(
                ind
                + f"    if (nr == {NR}) {{ for (int64_t j = 0; j < {NR}; j++) dst[j] = {load('src[j]')}; }}"
            )
            out.append(
                ind
                + f"    else {{ for (int64_t j = 0; j < {NR}; j++) dst[j] = j < nr ? {load('src[j]')} : 0.0f; }}"
            )
        else:
            out.append(
                ind
                + f"    for (int64_t j = 0; j < {NR}; j++) dst[j] = j < nr ? {load(f'src[j * {yn}]')} : 0.0f;"
            )
        out.append(ind + "}")

    def _pack_transposed(
        self, out: list[str], ind: str, ysrc: str, yn: int, kfrom: str, kcount: str
    ) -> str:
        """Copy a Y that is contiguous along k and strided along n (attention's key matrix,
        read as K^T) into the panel in square blocks: a vector load along k from each of
        `width` columns, an in-register transpose, a vector store per k.  Returns the C
        expression of the first k left for the element loop (the tail past whole blocks);
        "0" where the ISA has no transpose.  Element by element, the panel of a 197 x 64
        head cost a strided scalar load and a select per float: ViT@8's Q.K^T ran at 85-105
        GFLOP/s against 200 for its other products."""
        isa, NR = self.isa, self.NR
        W = isa.width
        if not isa.transpose or NR % W:
            return "0"
        out.append(ind + "int64_t kt = 0;")
        out.append(ind + f"for (; kt + {W} <= {kcount}; kt += {W}) {{")
        out.append(ind + f"    for (int64_t jb = 0; jb < {NR}; jb += {W}) {{")
        out.append(ind + f"        lum_vf r[{W}];")
        out.append(ind + f"        for (int64_t j = 0; j < {W}; j++)")
        out.append(
            ind + f"            r[j] = jb + j < nr ? LUM_VLOAD({ysrc} + (jb + j) * {yn} + "
            f"{kfrom} + kt) : LUM_VZERO();"
        )
        out.append(ind + "        LUM_VTRANSPOSE(r);")
        out.append(ind + f"        for (int64_t j = 0; j < {W}; j++)")
        out.append(ind + f"            LUM_VSTORE(ypack + (kt + j) * {NR} + jb, r[j]);")
        out.append(ind + "    }")
        out.append(ind + "}")
        return "kt"

    def _widen_f16(self) -> str:
        """A helper converting n fp16 values to f32: `vcvtph2ps` eight at a time where the
        ISA has F16C (every AVX2 machine), C's conversion for the rest."""
        name = f"{self.w.name}_widen"
        if name not in self.made:
            self.made.add(name)
            self.w.helpers.append(
                f"static inline void {name}(float *dst, const _Float16 *src, int64_t n) {{\n"
                "    int64_t j = 0;\n"
                "#ifdef __F16C__\n"
                "    for (; j + 8 <= n; j += 8)\n"
                "        _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + j))));\n"
                "#endif\n"
                "    for (; j < n; j++) dst[j] = (float)src[j];\n"
                "}"
            )
        return name

    def _micro(
        self,
        rows: int,
        nv: int,
        xk: str,
        pfs: int | None = None,
        lanes: int | None = None,
        step: int | None = None,
    ) -> str:
        """A helper function: `rows` x `nv` vectors of accumulators (from zero, or from
        `init`) over k in [kfrom, kfrom + kn), stored to `tile`; with `pack`, every Y
        vector read is also stored there (the panel copy made by the first row tile).  A function of its own
        so that GCC allocates the accumulators to registers: inlined into the OpenMP
        body it spilled half of them (8 x 32 ran at 41 GFLOP/s instead of 95, 1 thread).
        With `lanes`, the last vector of Y loads only its first `lanes` lanes (masked, the
        rest zero): a narrower last column tile read in place, never past its row.
        With `step`, row i is read at `xr[0] + i * step`: one pointer, the rows at
        constant displacements, whatever the tile's height."""
        VW, NR = self.isa.width, self.NR
        name = f"{self.w.name}_mk{rows}x{nv}" + (f"m{lanes}" if lanes else "")
        name += f"s{step}" if step is not None else ""
        pf_arg = ", const float *pf" if pfs is not None else ""
        if name in self.made:
            return name
        self.made.add(name)
        acc = [[f"c{i}_{j}" for j in range(nv)] for i in range(rows)]
        lines = [
            f"static __attribute__((noinline, noclone)) void {name}(const float *const *xr, const float *yk, "
            f"int64_t ys, int64_t kfrom, int64_t kn, float *tile, const float *init, float *pack{pf_arg}) {{"
        ]
        for i in range(rows):
            lines.append(
                "    lum_vf "
                + ", ".join(
                    f"{acc[i][j]} = init ? LUM_VLOAD(init + {i * NR + j * VW}) : LUM_VZERO()"
                    for j in range(nv)
                )
                + ";"
            )
        if step is None:
            for i in range(rows):
                lines.append(f"    const float *x{i} = xr[{i}];")
        else:
            lines.append("    const float *x0 = xr[0];")
        # Three loops: reading Y's source while copying it (the first row tile), reading
        # the source in place (a single row tile), reading the packed copy.  Reads of
        # the source are prefetched PREFETCH_ROWS rows ahead: its rows are a weight
        # matrix's row stride apart, which the hardware prefetchers do not follow
        # across pages, and the first tile otherwise waits on memory at every row.
        heads = ["    if (pack) {", f"    }} else if (ys != {NR}) {{", "    } else {"]
        if pfs is not None:  # reading the copy while prefetching the next panel's rows
            heads.insert(2, "    } else if (pf) {")
        lines_per_row = -(-NR // 16)
        for mode, head in enumerate(heads):
            if pfs is not None and mode == 2:
                prefetch = (
                    f"__builtin_prefetch(pf + (kk / {lines_per_row}) * {pfs} "
                    f"+ (kk % {lines_per_row}) * 16, 0, 2);"
                )
            else:
                prefetch = ""
            lines.append(head)
            lines.append("        for (int64_t kk = 0; kk < kn; kk++, yk += ys) {")
            lines.append("            const int64_t k = kfrom + kk;")
            lines.append(f"            const int64_t o = {xk};")
            if mode < 2:
                lines.append(
                    "            "
                    + " ".join(
                        f"__builtin_prefetch(yk + {PREFETCH_ROWS} * ys + {c});"
                        for c in range(0, nv * VW, 16)
                    )
                )
            loads = [f"b{j} = LUM_VLOAD(yk + {j * VW})" for j in range(nv)]
            if lanes:
                loads[-1] = f"b{nv - 1} = LUM_VLOADN(yk + {(nv - 1) * VW}, {lanes})"
            lines.append("            const lum_vf " + ", ".join(loads) + ";")
            if mode == 0:
                lines.append(
                    "            "
                    + " ".join(f"LUM_VSTORE(pack + kk * {NR} + {j * VW}, b{j});" for j in range(nv))
                )
            if prefetch:
                lines.append("            " + prefetch)
            for i in range(rows):
                fmas = " ".join(
                    f"{acc[i][j]} = LUM_VFMA(a{i}, b{j}, {acc[i][j]});" for j in range(nv)
                )
                at = f"x{i}[o]" if step is None else f"x0[o + {i * step}]"
                lines.append(f"            const lum_vf a{i} = LUM_VBCAST({at}); {fmas}")
            lines.append("        }")
        lines.append("    }")
        for i in range(rows):
            lines.append(
                "    "
                + " ".join(f"LUM_VSTORE(tile + {i * NR + j * VW}, {acc[i][j]});" for j in range(nv))
            )
        lines.append("}")
        self.w.helpers.append("\n".join(lines))
        return name

    def _store(self, out: list[str], ind: str) -> None:
        """The tile to the output, through the epilogue.  Rows outer and columns inner
        when the output is row-major in (row, n); for a channel-major output (NCHW
        convolution: n is the channel, rows are positions with unit stride) a tile whose
        rows are consecutive positions is stored columns outer, rows inner, so the
        epilogue's loads and the stores are contiguous vectors (measured: the store was
        12% of a 56x56x64 3x3 convolution before, scattered by channel plane)."""
        lay, out_off = self.lay, self.lay.out
        last = lay.rows.vars[-1] if lay.rows.vars else None
        if last is not None and out_off.coeff(last) == 1 and out_off.coeff(lay.n) != 1:
            size = last.size
            out.append(ind + f"if ((m0 % {size}) + mr <= {size}) {{")
            inner = Axis(lay.rows.vars[:-1])
            out.append(ind + f"    const int64_t q = m0 / {size};")
            out.append(ind + "    (void)q;")
            out.extend(self._decl(inner, "q", ind + "    "))
            out.append(ind + f"    const int64_t {last.name}0 = m0 % {size};")
            if self.w.has_epilogue and self._reads_like_output():
                self._store_transposed(out, ind + "    ", last)
            else:
                self._store_by_column(out, ind, last)
            out.append(ind + "} else {")
            self._store_rows(out, ind + "    ")
            out.append(ind + "}")
        else:
            self._store_rows(out, ind)

    def _store_by_column(self, out: list[str], ind: str, last: Var) -> None:
        """A channel-major tile through the epilogue along its rows (channels) into a
        second tile, then copied out by column (position runs per channel)."""
        lay, out_off = self.lay, self.lay.out
        src = "tile"
        if self.w.has_epilogue:
            # The epilogue along the tile's rows first (unit stride in the tile, a
            # constant trip count: vectorized), the stores by column afterwards.
            # Computed in the store loop (rows inner, stride NR in the tile) it ran
            # scalar: a SiLU after efficientnet's first convolution cost 0.9 ms
            # of exp2 alone.
            src = "etile"
            NR = self.NR
            out.append(ind + f"    float etile[{self.MR * NR}] __attribute__((aligned(64)));")
            out.append(ind + "    for (int64_t mi = 0; mi < mr; mi++) {")
            out.append(ind + f"        const int64_t {last.name} = {last.name}0 + mi;")
            for full in (True, False):
                bound = str(NR) if full else "nr"
                out.append(ind + (f"        if (nr == {NR}) {{" if full else "        } else {"))
                out.append(ind + f"            for (int64_t ni = 0; ni < {bound}; ni++) {{")
                out.append(ind + f"                const int64_t {lay.n.name} = n0 + ni;")
                self.w._store(
                    out,
                    len(ind) // 4 + 4,
                    out_off,
                    f"tile[mi * {NR} + ni]",
                    self.acc_t,
                    dest=f"etile[mi * {NR} + ni]",
                )
                out.append(ind + "            }")
            out.append(ind + "        }")
            out.append(ind + "    }")

        def copy(nb: str, mb: str) -> None:  # the tile to the output, by column
            out.append(ind + f"    for (int64_t ni = 0; ni < {nb}; ni++) {{")
            out.append(ind + f"        const int64_t {lay.n.name} = n0 + ni;")
            out.append(ind + f"        for (int64_t mi = 0; mi < {mb}; mi++) {{")
            out.append(ind + f"            const int64_t {last.name} = {last.name}0 + mi;")
            value = f"{src}[mi * {self.NR} + ni]"
            if src == "tile":
                self.w._store(out, len(ind) // 4 + 3, out_off, value, self.acc_t)
            else:
                out.append(ind + f"            out[{out_off.c()}] = {value};")
            out.append(ind + "        }")
            out.append(ind + "    }")

        def transposed(nb: str, mb: str) -> None:  # `width` channels at a time
            VW, NR = self.isa.width, self.NR
            out.append(ind + f"        for (int64_t cb = 0; cb < {nb}; cb += {VW}) {{")
            out.append(ind + f"            lum_vf r[{VW}];")
            out.append(ind + f"            for (int64_t mi = 0; mi < {VW}; mi++)")
            out.append(
                ind + f"                r[mi] = mi < {mb} ? LUM_VLOAD(etile + mi * {NR} + cb) "
                ": LUM_VZERO();"
            )
            out.append(ind + "            LUM_VTRANSPOSE(r);")
            out.append(ind + f"            for (int64_t j = 0; j < {VW} && cb + j < {nb}; j++) {{")
            out.append(ind + f"                const int64_t {lay.n.name} = n0 + cb + j;")
            out.append(ind + f"                const int64_t {last.name} = {last.name}0;")
            out.append(ind + f"                LUM_VSTOREN(&out[{out_off.c()}], r[j], {mb});")
            out.append(ind + "            }")
            out.append(ind + "        }")

        if src == "etile" and self._transposes():
            # The tile transposed in registers, a block of width x width at a time, then
            # a vector of positions per channel.  GCC left the copy of a 12- or 14-row
            # tile scalar (a third of a mobilenet 1x1 convolution's time outside the
            # micro-kernel); a gather per channel was then most of the store's time
            # where K is short (the transpose against gathers, Zen 4: an RGB stem
            # 1.26x, mobilenet's 14x14 96 -> 576 1.18-1.33x).  A ragged tile's missing
            # rows are zeros, its missing channels are not stored.
            self._full_or_ragged(out, ind + "    ", transposed)
        elif src == "etile":
            # a full tile's copy in constant trip counts, which GCC unrolls and
            # vectorizes (a tile of 8 positions: 8 floats per channel); 3x3/2 stem -15%
            self._full_or_ragged(out, ind + "    ", copy)
        else:
            copy("nr", "mr")

    def _transposes(self) -> bool:
        """Whether a channel-major tile is copied out through an in-register transpose:
        the ISA has one and stores part of a vector, the tile's positions fit one vector
        (every tile of `tiles`), and the output is f32."""
        node = self.w.g.nodes[self.w.k.node]
        fits = self.MR <= self.isa.width
        return bool(self.isa.transpose and self.isa.storen) and fits and node.dtype is DType.F32

    def _full_or_ragged(self, out: list[str], ind: str, emit: Callable[[str, str], None]) -> None:
        """`emit(columns, rows)` for a full tile, in constant trip counts (which GCC
        unrolls and vectorizes), and for a ragged one, in the tile's `nr` and `mr`."""
        out.append(ind + f"if (mr == {self.MR} && nr == {self.NR}) {{")
        emit(str(self.NR), str(self.MR))
        out.append(ind + "} else {")
        emit("nr", "mr")
        out.append(ind + "}")

    def _reads_like_output(self) -> bool:
        """Whether the epilogue reads a tensor laid out as the output (a residual): along
        the tile's rows (positions) it is contiguous, along its columns (channels) it is
        a gather."""
        g, lay = self.w.g, self.lay
        size = numel(g.nodes[self.w.k.node].shape)
        operands = {lay.x[0], lay.y[0]}
        return any(
            r >= 0 and r not in operands and numel(g.nodes[r].shape) == size for r in self.w.k.reads
        )

    def _store_transposed(self, out: list[str], ind: str, last: Var) -> None:
        """A channel-major tile whose epilogue reads a residual: the tile transposed first
        (constant trip counts), then the epilogue by column along the positions, where the
        residual's loads and the output's stores are contiguous.  Run along the channels
        into a second tile and copied out by column, the epilogue gathered the residual
        one element per channel: a sixth of ResNet-50's 1x1 convolution time at 14x14.
        (Gathered columns ran a resnet50 14x14 256 -> 1024 convolution with its residual
        5-7% slower than this loop; the in-register transpose `_store_by_column` copies
        out with, 0.98-1.02x, Zen 4.)"""
        lay, MR, NR = self.lay, self.MR, self.NR
        out.append(ind + f"float ttile[{MR * NR}] __attribute__((aligned(64)));")
        out.append(ind + f"for (int64_t ni = 0; ni < {NR}; ni++)")
        out.append(
            ind
            + f"    for (int64_t mi = 0; mi < {MR}; mi++) ttile[ni * {MR} + mi] = tile[mi * {NR} + ni];"
        )

        def epilogue(nb: str, mb: str) -> None:  # by column, along the positions
            out.append(ind + f"    for (int64_t ni = 0; ni < {nb}; ni++) {{")
            out.append(ind + f"        const int64_t {lay.n.name} = n0 + ni;")
            out.append(ind + "        #pragma omp simd")
            out.append(ind + f"        for (int64_t mi = 0; mi < {mb}; mi++) {{")
            out.append(ind + f"            const int64_t {last.name} = {last.name}0 + mi;")
            self.w._store(out, len(ind) // 4 + 3, lay.out, f"ttile[ni * {MR} + mi]", self.acc_t)
            out.append(ind + "        }")
            out.append(ind + "    }")

        self._full_or_ragged(out, ind, epilogue)

    def _store_rows(self, out: list[str], ind: str) -> None:
        """The tile to the output row by row, through the epilogue.  A full row that is
        contiguous in a large output (`_KernelWriter.streams`) goes through a row buffer
        to non-temporal stores (`lum_stream_f32`)."""
        w, lay, NR = self.w, self.lay, self.NR
        stream = w.streams and lay.out.coeff(lay.n) == 1
        out.append(ind + "for (int64_t mi = 0; mi < mr; mi++) {")
        out.append(ind + "    const int64_t r = m0 + mi;")
        out.extend(self._decl(lay.rows, "r", ind + "    "))
        out.append(ind + f"    const {self.acc_t} *tr = tile + mi * {NR};")
        for full in (True, False):
            bound = str(NR) if full else "nr"
            out.append(ind + (f"    if (nr == {NR}) {{" if full else "    } else {"))
            if full and stream:
                out.append(ind + f"        float st[{NR}] __attribute__((aligned(64)));")
            out.append(ind + f"        for (int64_t ni = 0; ni < {bound}; ni++) {{")
            out.append(ind + f"            const int64_t {lay.n.name} = n0 + ni;")
            dest = "st[ni]" if full and stream else None
            w._store(out, len(ind) // 4 + 3, lay.out, "tr[ni]", self.acc_t, dest)
            out.append(ind + "        }")
            if full and stream:
                w.streamed = True
                out.append(ind + "        {")
                out.append(ind + f"            const int64_t {lay.n.name} = n0;")
                out.append(ind + f"            lum_stream_f32(out + ({lay.out.c()}), st, {NR});")
                out.append(ind + "        }")
        out.append(ind + "    }")
        out.append(ind + "}")
