"""SA-128's instruction set, and the binary form a program is stored in.

Memory: four DRAM regions (`input` k and `output` k: the caller's arrays; `weight`: the
artifact's constants; `arena`: intermediates) and an on-chip scratchpad of `SLOTS` tiles
of at most TILE x TILE f32 elements.

    LOAD   slot <- region[offset + sum(i_d * stride_d)]   a strided DMA read (stride 0
                                                          broadcasts)
    STORE  region[...] <- slot                            a strided DMA write
    MATMUL acc <- (acc if accumulate else 0) + a @ b      one pass through the array
    ACT    dst <- fn(src...)                              the vector unit, elementwise
    FILL   dst <- value, rows x cols                      a constant tile

Encoding (little endian): b"SA01", u32 count, then per instruction an opcode byte and its
fields; LOAD and STORE carry u8 dims followed by (u32 count, i64 stride) pairs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

MAGIC = b"SA01"
TILE = 128  # systolic array rows and columns; the largest tile side
SLOTS = 64  # scratchpad tiles

REGIONS = ("input", "output", "weight", "arena")


class Fn(IntEnum):
    """Vector-unit functions; each is the IR op of the same name on f32 (bool for masks)."""

    COPY = 0
    EXP2 = 1
    LOG2 = 2
    SIN = 3
    SQRT = 4
    RECIP = 5
    ADD = 6
    MUL = 7
    MAX = 8
    CMPLT = 9
    CMPEQ = 10
    WHERE = 11
    TO_F32 = 12
    TO_BOOL = 13


ARITY = {Fn.WHERE: 3, **{f: 2 for f in (Fn.ADD, Fn.MUL, Fn.MAX, Fn.CMPLT, Fn.CMPEQ)}}


@dataclass(frozen=True)
class Load:
    slot: int
    region: int  # index into REGIONS
    index: int  # which input or output; 0 for weight and arena
    offset: int  # in f32 elements
    dims: tuple[tuple[int, int], ...]  # (count, stride in elements), outermost first


@dataclass(frozen=True)
class Store:
    slot: int
    region: int
    index: int
    offset: int
    dims: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class MatMul:
    acc: int
    a: int
    b: int
    accumulate: bool


@dataclass(frozen=True)
class Act:
    fn: Fn
    dst: int
    srcs: tuple[int, ...]


@dataclass(frozen=True)
class Fill:
    dst: int
    rows: int
    cols: int
    value: float


Instruction = Load | Store | MatMul | Act | Fill
_OP = {Load: 1, Store: 2, MatMul: 3, Act: 4, Fill: 5}
_DMA = struct.Struct("<HBHqB")  # slot, region, index, offset, dims
_DIM = struct.Struct("<Iq")
_MATMUL = struct.Struct("<HHHB")
_ACT = struct.Struct("<BHB")  # fn, dst, number of sources (then u16 each)
_FILL = struct.Struct("<HIId")


class DecodeError(ValueError):
    """Bytes that are not an SA-128 program."""


def encode(program: tuple[Instruction, ...]) -> bytes:
    out = bytearray(MAGIC + struct.pack("<I", len(program)))
    for ins in program:
        out.append(_OP[type(ins)])
        if isinstance(ins, (Load, Store)):
            out += _DMA.pack(ins.slot, ins.region, ins.index, ins.offset, len(ins.dims))
            for count, stride in ins.dims:
                out += _DIM.pack(count, stride)
        elif isinstance(ins, MatMul):
            out += _MATMUL.pack(ins.acc, ins.a, ins.b, int(ins.accumulate))
        elif isinstance(ins, Act):
            out += _ACT.pack(int(ins.fn), ins.dst, len(ins.srcs))
            out += struct.pack(f"<{len(ins.srcs)}H", *ins.srcs)
        else:
            out += _FILL.pack(ins.dst, ins.rows, ins.cols, ins.value)
    return bytes(out)


def decode(data: bytes) -> tuple[Instruction, ...]:
    if data[:4] != MAGIC:
        raise DecodeError("not an SA-128 program (bad magic)")
    try:
        (count,) = struct.unpack_from("<I", data, 4)
        pos = 8
        program: list[Instruction] = []
        for _ in range(count):
            op = data[pos]
            pos += 1
            if op in (1, 2):
                slot, region, index, offset, ndim = _DMA.unpack_from(data, pos)
                pos += _DMA.size
                dims = []
                for _ in range(ndim):
                    dims.append(_DIM.unpack_from(data, pos))
                    pos += _DIM.size
                cls = Load if op == 1 else Store
                program.append(cls(slot, region, index, offset, tuple(dims)))
            elif op == 3:
                acc, a, b, accumulate = _MATMUL.unpack_from(data, pos)
                pos += _MATMUL.size
                program.append(MatMul(acc, a, b, bool(accumulate)))
            elif op == 4:
                fn, dst, n = _ACT.unpack_from(data, pos)
                pos += _ACT.size
                srcs = struct.unpack_from(f"<{n}H", data, pos)
                pos += 2 * n
                program.append(Act(Fn(fn), dst, tuple(srcs)))
            elif op == 5:
                dst, rows, cols, value = _FILL.unpack_from(data, pos)
                pos += _FILL.size
                program.append(Fill(dst, rows, cols, value))
            else:
                raise DecodeError(f"unknown opcode {op} at byte {pos - 1}")
    except (struct.error, IndexError, ValueError) as err:
        raise DecodeError(f"truncated or corrupt SA-128 program ({err})") from None
    if pos != len(data):
        raise DecodeError(f"{len(data) - pos} trailing bytes after the last instruction")
    return tuple(program)


def disassemble(program: tuple[Instruction, ...]) -> str:
    """One line per instruction, for the artifact's audit listing (program.s)."""
    lines = []
    for n, ins in enumerate(program):
        if isinstance(ins, (Load, Store)):
            where = REGIONS[ins.region] + (f"{ins.index}" if ins.region < 2 else "")
            dims = " x ".join(f"{c}:{s}" for c, s in ins.dims)
            arrow = (
                f"s{ins.slot} <- {where}" if isinstance(ins, Load) else f"{where} <- s{ins.slot}"
            )
            text = (
                f"{'load' if isinstance(ins, Load) else 'store':6} {arrow}[+{ins.offset}] ({dims})"
            )
        elif isinstance(ins, MatMul):
            text = f"matmul s{ins.acc} {'+' if ins.accumulate else ''}= s{ins.a} @ s{ins.b}"
        elif isinstance(ins, Act):
            args = ", ".join(f"s{s}" for s in ins.srcs)
            text = f"act    s{ins.dst} = {ins.fn.name.lower()}({args})"
        else:
            text = f"fill   s{ins.dst} = {ins.value!r} ({ins.rows}x{ins.cols})"
        lines.append(f"{n:6d}  {text}")
    return "\n".join(lines) + "\n"
