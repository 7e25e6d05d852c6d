"""Triton spellings of IR dtypes, literals, elementwise ops and index expressions.

Everything here returns Python source text for the body of a `@triton.jit` function.
The choices follow the reference interpreter, not Triton's fastest defaults: f32
division and square root are the correctly rounded `div_rn` / `sqrt_rn` (plain `/` and
`sqrt` are approximations on NVIDIA), `max` propagates NaN like `np.maximum`, integer
`%` and `//` are C's truncating operators with a zero divisor giving 0, and f16/bf16
transcendental functions are evaluated in f32 and rounded once, as numpy does.  The ops
are the shared table of `backends/exprs.py` with Triton's overrides (`CODE_FOR_OP`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from luminal.compiler.backends import exprs
from luminal.compiler.backends.exprs import Formatter, Printer
from luminal.compiler.ir import DType, Op
from luminal.compiler.schedule.symbolic import Atom, Div, Dyn, Lin, Mod, Var
from luminal.errors import UnsupportedOp

TL_TYPES: dict[DType, str] = {
    DType.F64: "tl.float64",
    DType.F32: "tl.float32",
    DType.F16: "tl.float16",
    DType.BF16: "tl.bfloat16",
    DType.I64: "tl.int64",
    DType.I32: "tl.int32",
    DType.I16: "tl.int16",
    DType.I8: "tl.int8",
    DType.U8: "tl.uint8",
    DType.U16: "tl.uint16",
    DType.U32: "tl.uint32",
    DType.U64: "tl.uint64",
    DType.BOOL: "tl.int1",  # a torch.bool buffer is a pointer to i1, one byte per element
}

TORCH_TYPES: dict[DType, str] = {
    DType.F64: "torch.float64",
    DType.F32: "torch.float32",
    DType.F16: "torch.float16",
    DType.BF16: "torch.bfloat16",
    DType.I64: "torch.int64",
    DType.I32: "torch.int32",
    DType.I16: "torch.int16",
    DType.I8: "torch.int8",
    DType.U8: "torch.uint8",
    DType.U16: "torch.uint16",
    DType.U32: "torch.uint32",
    DType.U64: "torch.uint64",
    DType.BOOL: "torch.bool",
}

_HALF = (DType.F16, DType.BF16)


def tltype(dtype: DType) -> str:
    return TL_TYPES[dtype]


def acc_type(op: Op, dtype: DType) -> DType:
    """Accumulator of a reduction: f16/bf16 sums in f32, integer sums in i64 (numpy's
    sum widens small integers, and wrapping back to the narrow type agrees with it)."""
    if op is Op.SUM and dtype in _HALF:
        return DType.F32
    if op is Op.SUM and dtype.is_int:
        return DType.U64 if dtype in (DType.U8, DType.U16, DType.U32, DType.U64) else DType.I64
    if dtype is DType.BOOL:
        return DType.I32
    return dtype


def literal(value: object, dtype: DType) -> str:
    """A 0-d tensor of exactly `dtype` (a bare Python number would be weakly typed)."""
    v = np.asarray(value).astype(dtype.np).reshape(())
    if dtype is DType.BOOL:
        text = "True" if bool(v) else "False"
    elif dtype.is_int:
        text = str(int(v))
    else:
        f = float(v)
        if math.isnan(f):
            text = 'float("nan")'
        elif math.isinf(f):
            text = 'float("inf")' if f > 0 else '-float("inf")'
        else:
            text = repr(f)
    return f"tl.full([], {text}, {TL_TYPES[dtype]})"


def reduce_init(op: Op, dtype: DType) -> str:
    """Identity of the reduction of `dtype` values, in the accumulator's type."""
    return literal(exprs.identity(op, dtype), acc_type(op, dtype))


def _call(fn: str) -> Formatter:
    return lambda p, dtype, x: f"{fn}({x})"


def _reciprocal(p: Printer, dtype: DType, x: str) -> str:
    if dtype is DType.F32:
        return f"tl.div_rn({p.literal(1.0, dtype)}, {x})"
    return exprs.CODE_FOR_OP[Op.RECIP](p, dtype, x)


def _sqrt(p: Printer, dtype: DType, x: str) -> str:
    return f"tl.sqrt_rn({x})" if dtype is DType.F32 else f"tl.sqrt({x})"


def _max(p: Printer, dtype: DType, a: str, b: str) -> str:
    if dtype is DType.BOOL:
        return f"({a} | {b})"
    if dtype.is_float:
        return f"tl.maximum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"
    return f"tl.maximum({a}, {b})"


def _guarded(op: Op, sym: str) -> Formatter:
    """C's truncating `%` or `/` with a zero divisor giving 0; the divisor is replaced
    by 1 where it is 0, since `tl.where` evaluates both sides."""

    def formatter(p: Printer, dtype: DType, a: str, b: str) -> str:
        if dtype.is_float:
            if op is Op.IDIV:
                raise UnsupportedOp("idiv needs integer operands", op=op.value)
            return f"({a} % {b})"  # frem: the sign of the dividend, as C's fmod
        zero, one = literal(0, dtype), literal(1, dtype)
        return f"tl.where({b} == {zero}, {zero}, {a} {sym} tl.where({b} == {zero}, {one}, {b}))"

    return formatter


#: The shared table with Triton's spellings: correctly rounded f32 division and square
#: root, `tl` functions, NaN-propagating max, a zero divisor giving 0.
CODE_FOR_OP: Mapping[Op, Formatter] = MappingProxyType(
    {
        **exprs.CODE_FOR_OP,
        Op.RECIP: _reciprocal,
        Op.SQRT: _sqrt,
        Op.EXP2: _call("tl.exp2"),
        Op.LOG2: _call("tl.log2"),
        Op.SIN: _call("tl.sin"),
        Op.MAX: _max,
        Op.MOD: _guarded(Op.MOD, "%"),
        Op.IDIV: _guarded(Op.IDIV, "//"),
    }
)

TRITON = Printer("Triton", literal, CODE_FOR_OP)


def unary(op: Op, dtype: DType, x: str) -> str:
    if not dtype.is_float:
        raise UnsupportedOp(f"{op.value} needs a float operand, got {dtype.value}", op=op.value)
    if dtype in _HALF:  # evaluate in f32, round once
        return cast(DType.F32, dtype, unary(op, DType.F32, f"{x}.to(tl.float32)"))
    return TRITON.render(op, dtype, x)


def cast(src: DType, dst: DType, x: str) -> str:
    if dst is DType.BOOL:
        return f"({x} != {literal(0, src)})"
    return f"{x}.to({TL_TYPES[dst]})"


def binary(op: Op, dtype: DType, a: str, b: str) -> str:
    """`dtype` is the operands' type (comparisons return bool)."""
    return TRITON.render(op, dtype, a, b)


# ---- index expressions -------------------------------------------------------------------


def index(lin: Lin, names: Mapping[str, str]) -> str:
    """Python source of an integer index; loop variables are renamed through `names`
    (a flat block index such as `o`, or a broadcast of it such as `o[:, None]`)."""
    parts = []
    for atom, k in recombine(lin).terms:
        code = _atom(atom, names)
        parts.append(code if k == 1 else f"{k} * {code}" if k > 0 else f"({k}) * {code}")
    if lin.const or not parts:
        parts.append(str(lin.const) if lin.const >= 0 else f"({lin.const})")
    return " + ".join(parts)


def recombine(lin: Lin) -> Lin:
    """Undo unflatten-then-flatten: c*d*(x // d) + c*(x % d) == c*x, also when x is
    itself y // e (its partner then appears as y // (e*d)).  A contiguous read of an
    elementwise kernel then renders as `p + o`, which Triton sees is contiguous and
    vectorizes, instead of a div/mod chain it cannot see through."""
    changed = True
    while changed:
        changed = False
        coeffs = dict(lin.terms)
        for atom, c in lin.terms:
            if not isinstance(atom, Mod):
                continue
            x, d = atom.x, atom.d
            partner: Atom = Div(x, d)
            whole = x
            if partner not in coeffs and not x.const and len(x.terms) == 1:
                inner, k = x.terms[0]
                if isinstance(inner, Div) and k == 1:
                    partner = Div(inner.x, inner.d * d)
            if coeffs.get(partner) == c * d:
                rest = Lin(
                    tuple((a, k) for a, k in lin.terms if a not in (atom, partner)), lin.const
                )
                lin = rest + whole * c
                changed = True
                break
    return lin


def _atom(atom: Atom, names: Mapping[str, str]) -> str:
    if isinstance(atom, Var):
        return names[atom.name]
    if isinstance(atom, Dyn):
        return atom.code
    op = "//" if isinstance(atom, Div) else "%"
    return f"(({index(atom.x, names)}) {op} {atom.d})"


def depends(lin: Lin) -> bool:
    return bool(lin.terms)
