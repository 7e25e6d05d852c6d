"""Vector instruction spellings for the generated matrix-multiply micro-kernels.

The micro-kernel (`gemm.py`) is written against six macros, `LUM_V*`, over one vector type
`lum_vf`; an `Isa` gives their definitions for one instruction set.  The choice follows
the CPU features the library is compiled for (`toolchain.feature_flags`), so the code
never uses an instruction the manifest does not require.  Without FMA the multiply and
the add round separately, as the portable path does without `fma()`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Isa:
    name: str  # "avx512" | "avx2" | "avx" | ""
    width: int  # f32 lanes per vector
    registers: int  # architectural vector registers
    vtype: str
    load: str  # unaligned load
    store: str  # unaligned store
    bcast: str
    zero: str
    fma: str  # a*b+c, one rounding when the ISA has FMA
    fused: bool
    loadn: str = ""  # LUM_VLOADN(p, n): the first n lanes (0 <= n <= width), the rest zero
    gathern: str = ""  # LUM_VGATHERN(p, s, n): p[0], p[s], ... for n lanes, the rest zero
    # LUM_VLOADEVEN(p): p[0], p[2], ..., p[2 * (width - 1)], what a full gather of stride 2
    # reads, as one load, one masked load (never past its last element) and a shuffle;
    # LUM_VLOADEVENN(p, n): the first n of those lanes, the rest zero (two masked loads)
    loadeven: str = ""
    loadevenn: str = ""
    storen: str = ""  # LUM_VSTOREN(p, v, n): the first n lanes of v to p[0..n), no more
    # LUM_VTRANSPOSE(r): the width x width block in the vectors r[0..width) transposed in
    # place (lane j of r[i] to lane i of r[j]), by shuffles
    transpose: str = ""

    def macros(self, prefix: str = "V", vector: str = "lum_vf") -> str:
        """The `LUM_<prefix>*` macros over the vector type `vector` (`LUM_VLOAD`, ...;
        `LUM_HLOAD`, ... for the half-width set a wider ISA carries, `HALF`)."""
        if not self.name:
            return ""
        m = f"#define LUM_{prefix}"
        return (
            (
                "#include <immintrin.h>\n"
                f"typedef {self.vtype} {vector};\n"
                f"{m}LOAD(p) {self.load}(p)\n"
                f"{m}STORE(p, v) {self.store}(p, v)\n"
                f"{m}BCAST(x) {self.bcast}(x)\n"
                f"{m}ZERO() {self.zero}()\n"
                f"{m}FMA(a, b, c) {self.fma}\n"
            )
            + (
                f"{m}LOADN(p, n) {self.loadn}\n{m}GATHERN(p, s, n) {self.gathern}\n"
                f"{m}LOADEVEN(p) {self.loadeven}\n"
                f"{m}LOADEVENN(p, n) {self.loadevenn}\n"
                f"{m}STOREN(p, v, n) {self.storen}\n"
                if self.loadn
                else ""
            )
            + (self.transpose.replace("LUM_V", f"LUM_{prefix}") if self.transpose else "")
        )


#: Lanes 0..7 (AVX2's 8 f32 lanes), and the offsets of a gather of stride s over them.
_LANES8 = "_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)"
_STRIDE8 = f"_mm256_mullo_epi32(_mm256_set1_epi32((int)(s)), {_LANES8})"


def _avx2_mask(count: str) -> str:
    """AVX2 lanes below `count`: an all-ones 32-bit mask per lane (maskload and gathers
    read only those)."""
    return f"_mm256_cmpgt_epi32(_mm256_set1_epi32((int)({count})), {_LANES8})"


_AVX2_LOADN = f"_mm256_maskload_ps(p, {_avx2_mask('n')})"
_AVX2_GATHERN = (
    f"_mm256_mask_i32gather_ps(_mm256_setzero_ps(), p, {_STRIDE8}, "
    f"_mm256_castsi256_ps({_avx2_mask('n')}), 4)"
)


def _avx512_mask(count: str) -> str:
    """The first `count` lanes (none when it is not positive, all 16 from 16 up)."""
    c = f"(int64_t)({count})"
    return f"(__mmask16)({c} <= 0 ? 0u : {c} >= 16 ? 0xffffu : (1u << {c}) - 1u)"


def _even(first: str, second: str) -> str:
    """The even lanes of `first` (p's 8 floats) and `second` (p + 8's): [a0 a2 b0 b2 |
    a4 a6 b4 b6] by one shuffle, then the 64-bit pairs in order."""
    return (
        "_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd("
        f"_mm256_shuffle_ps({first}, {second}, 0x88)), 0xd8))"
    )


#: A 16 x 16 transpose in four rounds of two-source shuffles (64 in all): 32-bit pairs,
#: 64-bit pairs, then 128-bit lanes twice.  Round two leaves, for rows 4g..4g+3, one
#: vector per c whose 128-bit lane L holds column 4L + c; rounds three and four gather
#: lane L of the four row groups into column 4L + c.
_AVX512_TRANSPOSE = r"""static inline void LUM_VTRANSPOSE(__m512 *r) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    __m512 u[16];  /* u[4 * g + c]: rows 4g..4g+3, column 4L + c in lane L */
    for (int g = 0; g < 4; g++) {
        const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int c = 0; c < 4; c++) {
        const __m512 lo01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);
        const __m512 hi01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xee);
        const __m512 lo23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
        const __m512 hi23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xee);
        r[c] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(lo01, lo23, 0xdd);
        r[8 + c] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(hi01, hi23, 0xdd);
    }
}
"""

AVX512 = Isa(
    "avx512",
    16,
    32,
    "__m512",
    "_mm512_loadu_ps",
    "_mm512_storeu_ps",
    "_mm512_set1_ps",
    "_mm512_setzero_ps",
    "_mm512_fmadd_ps(a, b, c)",
    True,
    "_mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), p)",
    "_mm512_mask_i32gather_ps(_mm512_setzero_ps(), (__mmask16)((1u << (n)) - 1u), "
    "_mm512_mullo_epi32(_mm512_set1_epi32((int)(s)), "
    "_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)), p, 4)",
    "_mm512_permutex2var_ps(_mm512_loadu_ps(p), "
    "_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), "
    "_mm512_maskz_loadu_ps((__mmask16)0x7fff, (p) + 16))",
    "_mm512_permutex2var_ps(_mm512_maskz_loadu_ps(" + _avx512_mask("2 * (n) - 1") + ", p), "
    "_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), "
    "_mm512_maskz_loadu_ps(" + _avx512_mask("2 * (n) - 17") + ", (p) + 16))",
    "_mm512_mask_storeu_ps(p, " + _avx512_mask("n") + ", v)",
    _AVX512_TRANSPOSE,
)
AVX2 = Isa(
    "avx2",
    8,
    16,
    "__m256",
    "_mm256_loadu_ps",
    "_mm256_storeu_ps",
    "_mm256_set1_ps",
    "_mm256_setzero_ps",
    "_mm256_fmadd_ps(a, b, c)",
    True,
    _AVX2_LOADN,
    _AVX2_GATHERN,
    _even("_mm256_loadu_ps(p)", f"_mm256_maskload_ps((p) + 8, {_avx2_mask('7')})"),
    _even(
        f"_mm256_maskload_ps(p, {_avx2_mask('2 * (n) - 1')})",
        f"_mm256_maskload_ps((p) + 8, {_avx2_mask('2 * (n) - 9')})",
    ),
    # no `storen` nor `transpose`: the channel-major copies they enable
    # (`gemm._transposes`, an 8 x 8 block here) were measured on AVX-512 only
)


def _evex_mask8(count: str) -> str:
    """The first `count` of 8 lanes as an AVX-512 mask register (none when it is not
    positive, all from 8 up)."""
    c = f"(int64_t)({count})"
    return f"(__mmask8)({c} <= 0 ? 0u : {c} >= 8 ? 0xffu : (1u << {c}) - 1u)"


#: AVX2's 8 lanes on an AVX-512 core (`HALF`), its masked loads and gathers with mask
#: registers (AVX-512VL): AMD Zen 4 runs AVX2's `vmaskmovps` load at a fraction of a
#: plain load's rate, and a 7-wide row's every load is masked (efficientnet's 1152-channel
#: 7x7 5x5 depthwise convolution with SiLU, one thread: 97 -> 87 us).
AVX512_HALF = dataclasses.replace(
    AVX2,
    name="avx512-ymm",
    loadn=f"_mm256_maskz_loadu_ps({_evex_mask8('n')}, p)",
    gathern=f"_mm256_mmask_i32gather_ps(_mm256_setzero_ps(), {_evex_mask8('n')}, {_STRIDE8}, p, 4)",
    loadeven=_even("_mm256_loadu_ps(p)", f"_mm256_maskz_loadu_ps({_evex_mask8('7')}, (p) + 8)"),
    loadevenn=_even(
        f"_mm256_maskz_loadu_ps({_evex_mask8('2 * (n) - 1')}, p)",
        f"_mm256_maskz_loadu_ps({_evex_mask8('2 * (n) - 9')}, (p) + 8)",
    ),
    storen=f"_mm256_mask_storeu_ps(p, {_evex_mask8('n')}, v)",
)
AVX = Isa(
    "avx",
    8,
    16,
    "__m256",
    "_mm256_loadu_ps",
    "_mm256_storeu_ps",
    "_mm256_set1_ps",
    "_mm256_setzero_ps",
    "_mm256_add_ps(_mm256_mul_ps(a, b), c)",
    False,
)
NONE = Isa("", 1, 0, "", "", "", "", "", "", False)


def isa_for(features: tuple[str, ...] | frozenset[str]) -> Isa:
    """The widest vector ISA among the features the library is compiled for; AVX-512 is
    F with VL (every AVX-512 core since Skylake-SP; Xeon Phi, without VL, takes AVX2)."""
    if {"avx512f", "avx512vl", "fma"} <= set(features):
        return AVX512
    if "avx2" in features and "fma" in features:
        return AVX2
    if "avx" in features:
        return AVX
    return NONE


ISAS = {isa.name: isa for isa in (AVX512, AVX2, AVX, NONE)}

#: The half-width ISA a library built for a wider one also carries (as `LUM_H*` macros
#: over `lum_hf`): a depthwise convolution's 7-wide rows fill 7 of AVX-512's 16 lanes but
#: 7 of AVX2's 8, and on a CPU that splits a 512-bit operation in two (AMD Zen 4) the
#: narrower FMA costs half as much (`stencil`'s half variant; the search measures it).
HALF = {"avx512": AVX512_HALF}
