"""C spellings of IR dtypes, literals and elementwise ops."""

from __future__ import annotations

import math

import numpy as np

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
static inline float lum_maxf(float a, float b) { return (a != a || a > b) ? a : b; }
static inline double lum_maxd(double a, double b) { return (a != a || a > b) ? a : b; }
static inline int64_t lum_clamp(int64_t i, int64_t hi) { return i < 0 ? 0 : (i > hi ? hi : i); }
static inline float lum_bf16_to_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t lum_f32_to_bf16(float f) {
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


_UNARY = {
    Op.EXP2: ("exp2f", "exp2"),
    Op.LOG2: ("log2f", "log2"),
    Op.SIN: ("sinf", "sin"),
    Op.SQRT: ("sqrtf", "sqrt"),
}


def computable(op: Op, dtype: DType) -> None:
    if dtype is DType.BF16:
        raise UnsupportedOp(
            f"the CPU backend computes nothing in bf16 ({op.value}); cast to f32 first", op=op.value
        )


def unary(op: Op, dtype: DType, x: str) -> str:
    computable(op, dtype)
    if op is Op.RECIP:
        return f"({literal(1.0, dtype)} / {x})"
    f32, f64 = _UNARY[op]
    return f"{f32 if dtype in (DType.F32, DType.F16) else f64}({x})"


def cast(src: DType, dst: DType, x: str) -> str:
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
    if op is Op.ADD:
        return f"({a} | {b})" if dtype is DType.BOOL else f"({a} + {b})"
    if op is Op.MUL:
        return f"({a} & {b})" if dtype is DType.BOOL else f"({a} * {b})"
    if op is Op.MAX:
        if dtype in (DType.F32, DType.F16):
            return f"lum_maxf({a}, {b})"
        if dtype is DType.F64:
            return f"lum_maxd({a}, {b})"
        return f"({a} > {b} ? {a} : {b})"
    if op is Op.MOD:
        if dtype.is_float:
            return f"{'fmod' if dtype is DType.F64 else 'fmodf'}({a}, {b})"
        return f"({b} == 0 ? 0 : {a} % {b})"
    if op is Op.IDIV:
        return f"({b} == 0 ? 0 : {a} / {b})"
    if op is Op.CMPLT:
        return f"(uint8_t)({a} < {b})"
    if op is Op.CMPEQ:
        return f"(uint8_t)({a} == {b})"
    raise AssertionError(op)


def reduce_init(op: Op, dtype: DType) -> str:
    computable(op, dtype)
    if op is Op.SUM:
        return literal(0, dtype)
    if dtype.is_float:
        return "(-INFINITY)"
    if dtype is DType.BOOL:
        return "0"
    return literal(int(np.iinfo(dtype.np).min), dtype)
