"""C spellings of IR dtypes, literals and elementwise ops.

The ops are the shared table of `backends/exprs.py` with C's overrides (`CODE_FOR_OP`).

f32 `exp2` and `log2` are polynomials written here (`lum_exp2f`, `lum_log2f`) rather than
libm calls: GCC cannot vectorize a loop that calls `exp2f` without -ffast-math, and the
softmax, GELU and sigmoid loops are built on them.  Both are branch-free (selects only), so
every loop they appear in vectorizes; both are within 2 ulp of the correctly rounded
result over the whole float range, with IEEE special values (0, inf, NaN, subnormals).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from luminal.compiler.backends import exprs
from luminal.compiler.backends.exprs import Formatter, Printer
from luminal.compiler.ir import DType, Op
from luminal.errors import UnsupportedOp

CTYPES: dict[DType, str] = {
    DType.F64: "double",
    DType.F32: "float",
    DType.F16: "_Float16",  # arithmetic rounds every operation to f16 (GCC >= 12, clang >= 15)
    DType.BF16: "uint16_t",  # storage only: bf16 values are moved and cast, never computed on
    DType.I64: "int64_t",
    DType.I32: "int32_t",
    DType.I16: "int16_t",
    DType.I8: "int8_t",
    DType.U8: "uint8_t",
    DType.U16: "uint16_t",
    DType.U32: "uint32_t",
    DType.U64: "uint64_t",
    DType.BOOL: "uint8_t",
}

PRELUDE = r"""#include <stdint.h>
#include <math.h>
#include <string.h>
#define LUM_RESTRICT __restrict__
/* Every helper is inlined whatever the size of the file: in a whole model, GCC's unit
   growth limit left lum_exp2f out of line in some kernels, and a call in a loop stops its
   vectorization (efficientnet's SiLU depthwise convolutions ran 3x slower in the model
   than alone, and the search, timing every candidate in one larger file, chose a GEMM). */
#define LUM_INLINE static inline __attribute__((always_inline))
/* max(a, b), NaN kept: two selects of one comparison each.  Written with `a != a || a > b`,
   GCC could not if-convert it inside an `omp simd` loop ("control flow in loop"), and a
   sum over ReLU values (ResNet's last Add + ReLU + average pool) ran scalar and branchy. */
LUM_INLINE float lum_maxf(float a, float b) { const float m = a > b ? a : b; return a != a ? a : m; }
LUM_INLINE double lum_maxd(double a, double b) { const double m = a > b ? a : b; return a != a ? a : m; }
#pragma omp declare reduction(lum_maxf : float : omp_out = lum_maxf(omp_out, omp_in)) initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(lum_maxd : double : omp_out = lum_maxd(omp_out, omp_in)) initializer(omp_priv = -INFINITY)
LUM_INLINE float lum_bits_f(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
LUM_INLINE int32_t lum_f_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
/* x within [lo, hi] (lo < hi), NaN kept, as a clip's max then min computes it (the sign
   of a zero included), both selects as bit masks: written as ?: GCC branches on them */
LUM_INLINE float lum_selectf(int32_t c, float a, float b) { return lum_bits_f((-c & lum_f_bits(a)) | ((c - 1) & lum_f_bits(b))); }
LUM_INLINE float lum_clampf(float x, float lo, float hi) { const float t = lum_selectf(hi < x, hi, x); return lum_selectf(t <= lo, lo, t); }
/* a * b + c, fused where the target has a fast fused multiply-add (one rounding: the
   polynomials below are as accurate, in fewer instructions), else as written.  A SiLU
   epilogue's exp2 is most of its cost: with its Horner steps fused, efficientnet's
   96-channel 112x112 expansion convolution with SiLU ran 903 -> 783 us. */
#ifdef __FP_FAST_FMAF
#define LUM_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define LUM_FMAF(a, b, c) ((a) * (b) + (c))
#endif
/* 2^(c - n) for n = rint(c) (|c| < 2^22), n in *k: c + 1.5 * 2^23 leaves rint(c) in the
   low mantissa bits, so n and its integer come from one addition, and a NaN c (no
   float-to-int conversion of it, undefined in C) stays NaN.  2^f, |f| <= 1/2, by Cephes'
   exp2f polynomial (rel. error 1.7e-7). */
LUM_INLINE float lum_exp2_frac(float c, int32_t *k) {
    const float m = c + 12582912.0f;
    const float f = c - (m - 12582912.0f);
    *k = lum_f_bits(m) - 0x4b400000;
    float p = 1.535336188319500e-4f;
    p = LUM_FMAF(p, f, 1.339887440266574e-3f);
    p = LUM_FMAF(p, f, 9.618437357674640e-3f);
    p = LUM_FMAF(p, f, 5.550332471162809e-2f);
    p = LUM_FMAF(p, f, 2.402264791363012e-1f);
    p = LUM_FMAF(p, f, 6.931472028550421e-1f);
    return LUM_FMAF(p, f, 1.0f);
}
/* 2^x = 2^n 2^f (`lum_exp2_frac`), 2^n applied in two halves so that n in [-151, 129]
   never leaves the normal range; a NaN x stays NaN through the products (with rintf and
   a conversion instead of the shift, x was selected to 0 first and back at the end:
   0.32 -> 0.28 ns an element, one AVX-512 core). */
LUM_INLINE float lum_exp2f(float x) {
    const float c0 = x < -151.0f ? -151.0f : x;
    const float c = c0 > 129.0f ? 129.0f : c0;
    int32_t k;
    const float p = lum_exp2_frac(c, &k);
    const int32_t h = k >> 1;
    return p * lum_bits_f((int32_t)((uint32_t)(h + 127) << 23))
        * lum_bits_f((int32_t)((uint32_t)(k - h + 127) << 23));
}
/* 1 / (1 + 2^t), a logistic sigmoid's tail (t = -x log2(e); `idioms.Logistic`), with
   2^t as lum_exp2f computes it but t clamped to [-126, 128], where 2^n is one normal
   power of two or, at 128, infinity, as 2^t overflows: below -126, 1 + 2^t rounds to 1
   all the same, and from t = 127.5 the result is 0 where it would be a subnormal below
   2^-127.5.  15 vector operations to lum_exp2f's 19: SiLU 0.41 -> 0.29 ns an element
   (one AVX-512 core; lum_exp2f then had 23). */
LUM_INLINE float lum_logistic2f(float t) {
    const float c0 = t < -126.0f ? -126.0f : t;
    const float c = c0 > 128.0f ? 128.0f : c0;
    int32_t k;
    const float e = lum_exp2_frac(c, &k) * lum_bits_f((int32_t)((uint32_t)(k + 127) << 23));
    return 1.0f / (1.0f + e);
}
/* log2(x) = e + log2(m), m in [sqrt(1/2), sqrt(2)), by Cephes' logf polynomial in m - 1
   (rel. error 1e-7); subnormal inputs are scaled by 2^23 first.  Special values are
   selected one after another: a nested ?: is control flow that stops vectorization. */
LUM_INLINE float lum_log2f(float x) {
    const int sub = x < 1.17549435e-38f;
    const float xs = sub ? x * 8388608.0f : x;
    const int32_t bits = lum_f_bits(xs);
    const float m0 = lum_bits_f((bits & 0x007fffff) | 0x3f000000); /* [0.5, 1) */
    const int lo = m0 < 0.70710678118654752f;
    const float m = (lo ? m0 + m0 : m0) - 1.0f;
    const float e = (float)(((bits >> 23) & 0xff) - 126) - (lo ? 1.0f : 0.0f) - (sub ? 23.0f : 0.0f);
    const float z = m * m;
    float y = 7.0376836292e-2f;
    y = LUM_FMAF(y, m, -1.1514610310e-1f);
    y = LUM_FMAF(y, m, 1.1676998740e-1f);
    y = LUM_FMAF(y, m, -1.2420140846e-1f);
    y = LUM_FMAF(y, m, 1.4249322787e-1f);
    y = LUM_FMAF(y, m, -1.6668057665e-1f);
    y = LUM_FMAF(y, m, 2.0000714765e-1f);
    y = LUM_FMAF(y, m, -2.4999993993e-1f);
    y = LUM_FMAF(y, m, 3.3333331174e-1f);
    y = m * z * y - 0.5f * z;
    const float l2e = 0.44269504088896340736f;
    const float r = y * l2e + m * l2e + y + m + e;
    const float r1 = x == INFINITY ? x : r;
    const float r2 = x == 0.0f ? -INFINITY : r1;
    const float r3 = x < 0.0f ? NAN : r2;
    return x != x ? x : r3;
}
/* dst[0, n) = src[0, n), the 64-byte-aligned middle by non-temporal stores: written
   past the caches, a line costs no read for ownership and evicts nothing.  For outputs
   larger than the L2 cache (`codegen.STREAM_MIN_BYTES`): mobilenet_v2's 96-channel
   112x112 expansion convolution ran 816 -> 413 us, and the pad reading it back 6% slower.
   A function that streams ends with LUM_SFENCE(), before other threads read its output. */
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#define LUM_SFENCE() _mm_sfence()
LUM_INLINE void lum_stream_f32(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 63) != 0; i++) dst[i] = src[i];
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#else
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#endif
    for (; i < n; i++) dst[i] = src[i];
}
#else
#define LUM_SFENCE() ((void)0)
LUM_INLINE void lum_stream_f32(float *dst, const float *src, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
#endif
LUM_INLINE int64_t lum_clamp(int64_t i, int64_t hi) { return i < 0 ? 0 : (i > hi ? hi : i); }
LUM_INLINE float lum_bf16_to_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
#ifdef __FLT16_MAX__
/* fp16 -> f32 by its bits (exact, subnormals, inf and NaN): GCC 12 vectorizes this, not
   C's own _Float16 conversion, which it leaves one element at a time. */
LUM_INLINE float lum_f16_to_f32(_Float16 x) {
    uint16_t h; memcpy(&h, &x, 2);
    const uint32_t em = (uint32_t)(h & 0x7fffu), u = em << 13;
    float f; memcpy(&f, &u, 4);
    f *= 0x1p112f;  /* rebias the exponent; subnormals scale exactly too */
    uint32_t r; memcpy(&r, &f, 4);
    r = em >= 0x7c00u ? (u | 0x7f800000u) : r;
    r |= (uint32_t)(h & 0x8000u) << 16;
    memcpy(&f, &r, 4);
    return f;
}
#endif
/* f32 rounded to fp16 and back (to nearest even; subnormals; inf past 65504), in integer
   and float operations that GCC vectorizes: its _Float16 conversions are one element at a
   time.  Bit-exact against numpy's float16 rounding. */
LUM_INLINE float lum_round_f16(float x) {
    uint32_t u; memcpy(&u, &x, 4);
    const uint32_t a = u & 0x7fffffffu;
    const uint32_t n = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;
    float fa, fn; memcpy(&fa, &a, 4); memcpy(&fn, &n, 4);
    const float sub = (fa + 0.5f) - 0.5f;  /* below 2^-14: a multiple of 2^-24 */
    const float r0 = fa < 6.103515625e-05f ? sub : fn;
    const float r1 = r0 > 65504.0f ? INFINITY : r0;
    uint32_t ru; memcpy(&ru, &r1, 4); ru |= u & 0x80000000u;
    float r; memcpy(&r, &ru, 4);
    return x != x ? x : r;
}
LUM_INLINE uint16_t lum_f32_to_bf16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if (f != f) return (uint16_t)((u >> 16) | 0x40);  /* quiet NaN */
    u += 0x7fff + ((u >> 16) & 1);  /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}
"""


def ctype(dtype: DType, what: str) -> str:
    found = CTYPES.get(dtype)
    if found is None:
        raise UnsupportedOp(f"the CPU backend cannot yet generate {dtype.value} code", op=what)
    return found


def literal(value: object, dtype: DType) -> str:
    if dtype is DType.BF16:  # its bit pattern
        return str(int(np.asarray(value).astype(dtype.np).reshape(()).view(np.uint16)))
    v = np.asarray(value).reshape(()).item()
    if dtype is DType.BOOL:
        return "1" if v else "0"
    if dtype.is_int:
        if dtype is DType.I64:
            return f"INT64_C({int(v)})"
        if dtype in (DType.U32, DType.U64):
            return f"UINT64_C({int(v)})"
        return str(int(v))
    f = float(v)
    suffix = "f" if dtype in (DType.F32, DType.F16) else ""
    if math.isnan(f):
        return "NAN"
    if math.isinf(f):
        return "INFINITY" if f > 0 else "(-INFINITY)"
    return f"({f.hex()}{suffix})"


def computable(op: Op, dtype: DType) -> None:
    if dtype is DType.BF16:
        raise UnsupportedOp(
            f"the CPU backend computes nothing in bf16 ({op.value}); cast to f32 first", op=op.value
        )


def _libm(f32: str, f64: str) -> Formatter:
    """A libm-style function: the float one (also for f16, whose arithmetic C promotes to
    float) or the double one."""
    return lambda p, dtype, x: f"{f32 if dtype in (DType.F32, DType.F16) else f64}({x})"


def _byte(compare: Formatter) -> Formatter:
    """A comparison as a byte, C's spelling of an IR bool."""
    return lambda p, dtype, a, b: f"(uint8_t){compare(p, dtype, a, b)}"


def _max(p: Printer, dtype: DType, a: str, b: str) -> str:
    if dtype in (DType.F32, DType.F16):
        return f"lum_maxf({a}, {b})"
    if dtype is DType.F64:
        return f"lum_maxd({a}, {b})"
    return f"({a} > {b} ? {a} : {b})"


def _mod(p: Printer, dtype: DType, a: str, b: str) -> str:
    if dtype.is_float:
        if b == literal(2.0, dtype):
            # The evenness test of a round-half-to-even (a requantize): exactly fmod's
            # value, sign of zero included, but inline, so the loop around it vectorizes
            # (fmodf is a libm call).  a * 0.5 and the truncation are exact, and
            # a - 2 * trunc(a / 2) lies within a factor of two of a or is a itself.
            f = "" if dtype is DType.F64 else "f"
            return f"copysign{f}({a} - 2 * trunc{f}({a} * 0.5{f}), {a})"
        return f"{'fmod' if dtype is DType.F64 else 'fmodf'}({a}, {b})"
    return f"({b} == 0 ? 0 : {a} % {b})"


def _idiv(p: Printer, dtype: DType, a: str, b: str) -> str:
    return f"({b} == 0 ? 0 : {a} / {b})"


#: The shared table with C's spellings: libm calls, NaN-propagating max, a zero divisor
#: giving 0, comparisons as bytes.
CODE_FOR_OP: Mapping[Op, Formatter] = MappingProxyType(
    {
        **exprs.CODE_FOR_OP,
        Op.EXP2: _libm("lum_exp2f", "exp2"),
        Op.LOG2: _libm("lum_log2f", "log2"),
        Op.SIN: _libm("sinf", "sin"),
        Op.SQRT: _libm("sqrtf", "sqrt"),
        Op.MAX: _max,
        Op.MOD: _mod,
        Op.IDIV: _idiv,
        Op.CMPLT: _byte(exprs.CODE_FOR_OP[Op.CMPLT]),
        Op.CMPEQ: _byte(exprs.CODE_FOR_OP[Op.CMPEQ]),
    }
)

C = Printer("C", literal, CODE_FOR_OP)


def unary(op: Op, dtype: DType, x: str) -> str:
    computable(op, dtype)
    return C.render(op, dtype, x)


def cast(src: DType, dst: DType, x: str) -> str:
    if src is DType.F16 and dst is DType.F32:
        return f"lum_f16_to_f32({x})"
    if src is DType.BF16:
        x = f"lum_bf16_to_f32({x})"
    if dst is DType.BOOL:
        return f"(uint8_t)({x} != 0)"
    if dst is DType.BF16:
        if src is DType.F64:  # through float would round twice
            raise UnsupportedOp("a cast from f64 to bf16 is not supported", op="cast")
        return f"lum_f32_to_bf16((float)({x}))"
    return f"({CTYPES[dst]})({x})"


def binary(op: Op, dtype: DType, a: str, b: str) -> str:
    computable(op, dtype)
    return C.render(op, dtype, a, b)


def reduce_init(op: Op, dtype: DType) -> str:
    computable(op, dtype)
    return literal(exprs.identity(op, dtype), dtype)
