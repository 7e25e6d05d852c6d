"""C spellings of IR dtypes, literals and elementwise ops."""

from __future__ import annotations

import math

import numpy as np

from luminal.compiler.ir import DType, Op
from luminal.errors import UnsupportedOp

CTYPES: dict[DType, str] = {
    DType.F64: "double",
    DType.F32: "float",
    DType.I64: "int64_t",
    DType.I32: "int32_t",
    DType.I16: "int16_t",
    DType.I8: "int8_t",
    DType.U8: "uint8_t",
    DType.BOOL: "uint8_t",
}

PRELUDE = r"""#include <stdint.h>
#include <math.h>
#include <string.h>
#define LUM_RESTRICT __restrict__
static inline float lum_maxf(float a, float b) { return (a != a || a > b) ? a : b; }
static inline double lum_maxd(double a, double b) { return (a != a || a > b) ? a : b; }
static inline int64_t lum_clamp(int64_t i, int64_t hi) { return i < 0 ? 0 : (i > hi ? hi : i); }
"""


def ctype(dtype: DType, what: str) -> str:
    found = CTYPES.get(dtype)
    if found is None:
        raise UnsupportedOp(f"the CPU backend cannot yet generate {dtype.value} code", op=what)
    return found


def literal(value: object, dtype: DType) -> str:
    v = np.asarray(value).reshape(()).item()
    if dtype is DType.BOOL:
        return "1" if v else "0"
    if dtype.is_int:
        return f"INT64_C({int(v)})" if dtype is DType.I64 else str(int(v))
    f = float(v)
    suffix = "f" if dtype is DType.F32 else ""
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


def unary(op: Op, dtype: DType, x: str) -> str:
    if op is Op.RECIP:
        return f"({literal(1.0, dtype)} / {x})"
    f32, f64 = _UNARY[op]
    return f"{f32 if dtype is DType.F32 else f64}({x})"


def cast(src: DType, dst: DType, x: str) -> str:
    if dst is DType.BOOL:
        return f"(uint8_t)({x} != 0)"
    return f"({CTYPES[dst]})({x})"


def binary(op: Op, dtype: DType, a: str, b: str) -> str:
    if op is Op.ADD:
        return f"({a} | {b})" if dtype is DType.BOOL else f"({a} + {b})"
    if op is Op.MUL:
        return f"({a} & {b})" if dtype is DType.BOOL else f"({a} * {b})"
    if op is Op.MAX:
        if dtype is DType.F32:
            return f"lum_maxf({a}, {b})"
        if dtype is DType.F64:
            return f"lum_maxd({a}, {b})"
        return f"({a} > {b} ? {a} : {b})"
    if op is Op.MOD:
        if dtype.is_float:
            return f"{'fmodf' if dtype is DType.F32 else 'fmod'}({a}, {b})"
        return f"({b} == 0 ? 0 : {a} % {b})"
    if op is Op.IDIV:
        return f"({b} == 0 ? 0 : {a} / {b})"
    if op is Op.CMPLT:
        return f"(uint8_t)({a} < {b})"
    if op is Op.CMPEQ:
        return f"(uint8_t)({a} == {b})"
    raise AssertionError(op)


def reduce_init(op: Op, dtype: DType) -> str:
    if op is Op.SUM:
        return literal(0, dtype)
    if dtype.is_float:
        return "(-INFINITY)"
    if dtype is DType.BOOL:
        return "0"
    return literal(int(np.iinfo(dtype.np).min), dtype)
