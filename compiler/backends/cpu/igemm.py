"""The generated exact integer contraction: i16 operands, i32 sums, AVX2 `vpmaddwd`.

    for each work item (batch index, NR-wide column tile, block of rows)   [thread pool]
        X rows of the block: packed once per claim into pairs (k, k+1) of int16
        Y's K x NR panel: packed once per column tile, pairs (k, k+1) interleaved per column
        for each MR-row tile of the block
            MR x NR/8 i32 accumulators; per pair of k: one 32-bit broadcast of X's pair per
            row, `_mm256_madd_epi16` (8 columns x 2 products each) and `_mm256_add_epi32`
            store: to the output through the fused epilogue (a QLinearConv's requantize)

It takes i32 contractions whose operands are stored as int16 (`ir/narrow.py`: both
within [-32767, 32767], so each lane's pair sum fits i32 and `vpmaddwd` is exact; a
quantized model's are within [-255, 255]).  An odd K is padded with a zero pair half;
columns past N are zeros in the panel.  X is always packed (a convolution's rows read K
through a (cin, kh, kw) offset table): once per (batch, row block) per claim, so a thread
claiming a run of items packs each row block once, not once per column tile.  Row tiles,
blocks, threads and the epilogue store are the f32 kernel's (`gemm.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from luminal.compiler.backends.cpu import gemm
from luminal.compiler.backends.cpu.gemm_layout import GemmShape
from luminal.compiler.backends.cpu.simd import AVX2
from luminal.compiler.ir import DType
from luminal.compiler.schedule import Kernel, Schedule

if TYPE_CHECKING:
    from luminal.compiler.backends.cpu.codegen import _KernelWriter

#: Register tiles (MR rows x NR i32 columns) that fit AVX2's 16 ymm registers: MR x NR/8
#: accumulators, NR/8 panel vectors and one broadcast.
TILES = ((6, 16), (4, 24), (8, 8), (4, 16))
DEFAULT_TILE = TILES[0]

#: Most int16 elements of the thread-local packed X (every row of every batch):
#: 4 MiB, above a ResNet-18's largest (56 x 56 rows x 576).
MAX_XPACK = 1 << 21


def legal(sched: Schedule, kernel: Kernel, simd: str) -> bool:
    """An i32 contraction of two int16 buffers, on a machine with AVX2 integer ops."""
    p = kernel.contraction
    if simd not in ("avx2", "avx512") or p is None:
        return False
    node = sched.graph.nodes[kernel.reduction if kernel.reduction is not None else kernel.node]
    if node.dtype is not DType.I32:
        return False
    if sched.dtype(p.loops.x[0]) is not DType.I16 or sched.dtype(p.loops.y[0]) is not DType.I16:
        return False
    s = GemmShape.of(p)
    return s.batch * (s.m + 8) * (s.k + 1) <= MAX_XPACK


def write(w: _KernelWriter, out: list[str]) -> None:
    tile = (w.v.mr or DEFAULT_TILE[0], w.v.nr or DEFAULT_TILE[1])
    _IGemm(w, tile).write(out)


class _IGemm(gemm._Gemm):
    acc_t = "int32_t"

    def __init__(self, w: _KernelWriter, tile: tuple[int, int]) -> None:
        super().__init__(w, AVX2, tile)
        self.K2 = -(-self.K // 2)  # pairs of k

    def write(self, out: list[str]) -> None:
        w, lay = self.w, self.lay
        M, N, K, K2, MR, NR, NT, MB, B = (
            self.M,
            self.N,
            self.K,
            self.K2,
            self.MR,
            self.NR,
            self.NT,
            self.MB,
            self.B,
        )
        (xb, xoff), (yb, yoff) = lay.x, lay.y
        px, py = w._pointer(xb), w._pointer(yb)
        xk, yk = self._koff(xoff, "xk"), self._koff(yoff, "yk")
        xbase = lay.without(xoff, lay.k)  # batch and row variables
        ybase = lay.without(yoff, lay.k, lay.n)  # batch variables
        yn = yoff.coeff(lay.n)
        xrow = 2 * K2  # int16 per packed X row
        out.append(
            f"    static _Thread_local int16_t xpack[{B * M * xrow}] __attribute__((aligned(64)));"
        )
        out.append(
            f"    static _Thread_local int16_t ypack[{K2 * NR * 2}] __attribute__((aligned(64)));"
        )
        items = B * NT * MB
        if items > 1 and w._parallel(B * M * N * K):
            # One run of consecutive items per thread: its packs of X are reused across
            # the run's column tiles, its packs of Y across the row blocks of one tile.
            w.pool = (str(items), f"({items} + lum_threads() - 1) / lum_threads()")
            out.append("    for (int64_t t = lum_lo; t < lum_hi; t++) {")
        else:
            out.append(f"    for (int64_t t = 0; t < {items}; t++) {{")
        # what this claim has packed: X per (batch, row block), Y's current column tile
        out.insert(-1, f"    uint8_t xdone[{B * MB}] = {{0}};")
        out.insert(-1, "    int64_t ytile = -1;")
        i2 = "        "
        self._item(out, i2)
        out.append(i2 + f"const int64_t n0 = nt * {NR};")
        out.append(i2 + f"const int64_t nr = {N} - n0 < {NR} ? {N} - n0 : {NR};")
        out.append(i2 + f"int16_t *xb = xpack + bi * {M * xrow};")
        # X: the block's rows as int16 pairs, the odd K's last pair completed with 0
        out.append(i2 + f"if (!xdone[bi * {MB} + mb]) {{")
        out.append(i2 + f"    xdone[bi * {MB} + mb] = 1;")
        out.append(i2 + "    for (int64_t r = mlo; r < mhi; r++) {")
        out.extend(self._decl(lay.rows, "r", i2 + "        "))
        out.append(i2 + f"        const int16_t *src = {px} + ({xbase.c()});")
        out.append(i2 + f"        int16_t *dst = xb + r * {xrow};")
        out.append(i2 + f"        for (int64_t k = 0; k < {K}; k++) dst[k] = src[{xk}];")
        if K % 2:
            out.append(i2 + f"        dst[{K}] = 0;")
        out.append(i2 + "    }")
        out.append(i2 + "}")
        # Y: the column tile's panel, (k, k + 1) adjacent per column, zeros past N and K
        out.append(i2 + f"if (ytile != bi * {NT} + nt) {{")
        out.append(i2 + f"    ytile = bi * {NT} + nt;")
        out.append(i2 + f"    const int16_t *ysrc = {py} + ({ybase.c()}) + n0 * {yn};")
        out.append(i2 + f"    for (int64_t k = 0; k < {K}; k++) {{")
        out.append(i2 + f"        const int16_t *src = ysrc + {yk};")
        out.append(i2 + f"        int16_t *dst = ypack + (k >> 1) * {2 * NR} + (k & 1);")
        out.append(
            i2
            + f"        for (int64_t j = 0; j < {NR}; j++) dst[2 * j] = j < nr ? src[j * {yn}] : 0;"
        )
        out.append(i2 + "    }")
        if K % 2:
            out.append(
                i2
                + f"    for (int64_t j = 0; j < {NR}; j++) ypack[{(K2 - 1) * 2 * NR + 1} + 2 * j] = 0;"
            )
        out.append(i2 + "}")
        # row tiles
        out.append(i2 + f"for (int64_t m0 = mlo; m0 < mhi; m0 += {MR}) {{")
        i3 = i2 + "    "
        out.append(i3 + f"const int64_t mr = mhi - m0 < {MR} ? mhi - m0 : {MR};")
        out.append(i3 + f"int32_t tile[{MR * NR}] __attribute__((aligned(64)));")
        m_tail = M % MR
        shapes = [(MR, f"mr == {MR}")] + ([(m_tail, "1")] if m_tail else [])
        for k, (rows, cond) in enumerate(shapes):
            fn = self._imicro(rows)
            head = "if" if k == 0 else "else if"
            out.append(i3 + f"{head} ({cond}) {fn}(xb + m0 * {xrow}, ypack, tile);")
        self._store(out, i3)
        out.append(i2 + "}")
        out.append("    }")

    def _imicro(self, rows: int) -> str:
        """`rows` x NR/8 accumulators over the K/2 pairs, stored to `tile`: a function of
        its own so that GCC keeps the accumulators in registers (`gemm._Gemm._micro`)."""
        NR, K2, nv = self.NR, self.K2, self.NV
        xrow = 2 * K2
        name = f"{self.w.name}_imk{rows}"
        if name in self.made:
            return name
        self.made.add(name)
        acc = [[f"c{i}_{j}" for j in range(nv)] for i in range(rows)]
        lines = [
            f"static __attribute__((noinline, noclone)) void {name}(const int16_t *x, "
            "const int16_t *y, int32_t *tile) {"
        ]
        for i in range(rows):
            lines.append(
                "    __m256i " + ", ".join(f"{a} = _mm256_setzero_si256()" for a in acc[i]) + ";"
            )
        lines.append(f"    for (int64_t kp = 0; kp < {K2}; kp++, y += {2 * NR}) {{")
        lines.append(
            "        const __m256i "
            + ", ".join(
                f"b{j} = _mm256_load_si256((const __m256i *)(y + {16 * j}))" for j in range(nv)
            )
            + ";"
        )
        for i in range(rows):
            madds = " ".join(
                f"{acc[i][j]} = _mm256_add_epi32({acc[i][j]}, _mm256_madd_epi16(a{i}, b{j}));"
                for j in range(nv)
            )
            lines.append(
                f"        int32_t p{i}; memcpy(&p{i}, x + {i * xrow} + 2 * kp, 4); "
                f"const __m256i a{i} = _mm256_set1_epi32(p{i}); {madds}"
            )
        lines.append("    }")
        for i in range(rows):
            lines.append(
                "    "
                + " ".join(
                    f"_mm256_storeu_si256((__m256i *)(tile + {i * NR + 8 * j}), {acc[i][j]});"
                    for j in range(nv)
                )
            )
        lines.append("}")
        self.w.helpers.append("\n".join(lines))
        return name


__all__ = ["DEFAULT_TILE", "TILES", "legal", "write"]
