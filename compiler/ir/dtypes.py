"""Element types of the IR and their numpy, ONNX and torch counterparts."""

from __future__ import annotations

import enum
import functools

import numpy as np


class DType(enum.Enum):
    """An element type.  The value is the short name used in printed IR."""

    F64 = "f64"
    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    I64 = "i64"
    I32 = "i32"
    I16 = "i16"
    I8 = "i8"
    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    BOOL = "bool"

    @property
    def np(self) -> np.dtype:
        return _bfloat16() if self is DType.BF16 else _TO_NUMPY[self]

    @property
    def itemsize(self) -> int:
        return int(self.np.itemsize)

    @property
    def is_float(self) -> bool:
        return self in FLOATS

    @property
    def is_int(self) -> bool:
        return self in INTS

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type) -> DType:
        d = np.dtype(dtype)
        found = _FROM_NUMPY.get(d)
        if found is None and is_bfloat16(d):
            found = DType.BF16
        if found is None:
            raise ValueError(f"no IR dtype for numpy dtype {d}")
        return found


FLOATS = frozenset({DType.F64, DType.F32, DType.F16, DType.BF16})
INTS = frozenset(
    {DType.I64, DType.I32, DType.I16, DType.I8, DType.U8, DType.U16, DType.U32, DType.U64}
)

_TO_NUMPY: dict[DType, np.dtype] = {
    DType.F64: np.dtype(np.float64),
    DType.F32: np.dtype(np.float32),
    DType.F16: np.dtype(np.float16),
    DType.I64: np.dtype(np.int64),
    DType.I32: np.dtype(np.int32),
    DType.I16: np.dtype(np.int16),
    DType.I8: np.dtype(np.int8),
    DType.U8: np.dtype(np.uint8),
    DType.U16: np.dtype(np.uint16),
    DType.U32: np.dtype(np.uint32),
    DType.U64: np.dtype(np.uint64),
    DType.BOOL: np.dtype(np.bool_),
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}


def is_bfloat16(dtype: np.dtype) -> bool:
    """Whether `dtype` is ml_dtypes' bfloat16 (numpy's kind 'V', a void), known by its
    name so that asking never imports ml_dtypes."""
    return dtype.kind == "V" and dtype.name == "bfloat16"


def is_float_dtype(dtype: np.dtype) -> bool:
    """numpy's floats and ml_dtypes' bfloat16."""
    return dtype.kind == "f" or is_bfloat16(dtype)


@functools.cache
def _bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16, imported where one is met: the import takes 0.6-0.9 s, more
    than half of `import luminal` (0.98 -> 0.41 s without it)."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


# onnx.TensorProto.DataType values (stable across onnx releases).
ONNX_DTYPES: dict[int, DType] = {
    1: DType.F32,
    2: DType.U8,
    3: DType.I8,
    4: DType.U16,
    5: DType.I16,
    6: DType.I32,
    7: DType.I64,
    9: DType.BOOL,
    10: DType.F16,
    11: DType.F64,
    12: DType.U32,
    13: DType.U64,
    16: DType.BF16,
}
