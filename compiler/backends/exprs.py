"""One op-to-code table for the expression printers of every backend.

    CODE_FOR_OP                     the spellings C and Triton share (below)
      |-- cexpr.CODE_FOR_OP  = {**CODE_FOR_OP, C's overrides}       -> C source
      `-- texpr.CODE_FOR_OP  = {**CODE_FOR_OP, Triton's overrides}  -> Triton source

tinygrad's `code_for_op` (renderer/cstyle.py) is the model: one dict from op to a
formatter, which each language's printer copies and overrides where it spells an op its
own way.  Before this table the two printers were two if-ladders that said `a + b` and
`a | b` for a bool add twice; now what is written once is shared, and what differs (C's
NaN-propagating `lum_maxf` against Triton's `tl.maximum(..., propagate_nan=...)`, C's
byte-wide comparisons) is an override beside the language it belongs to.

A formatter is called as `formatter(printer, dtype, *operands)`: it gets the `Printer` so
that a shared entry can spell a typed constant in that printer's language (`recip` is
`one / x`, with `one` the literal 1 of x's type), and the operands' dtype because a
spelling may depend on it.  A language's own checks (C computes nothing in bf16; Triton
evaluates f16 transcendentals in f32 and rounds once) stay in its printer, around the
lookup.  What the languages agree on as values, the identity a reduction starts from, is
here too; how a value is spelt stays with each language's `literal`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from luminal.compiler.ir import DType, Op
from luminal.compiler.ir.ops import ARITY
from luminal.errors import UnsupportedOp

#: (printer, operand dtype, *operand texts) -> expression text.
Formatter = Callable[..., str]

#: (value, dtype) -> the text of a constant of exactly that dtype.
LiteralPrinter = Callable[[object, DType], str]


@dataclass(frozen=True)
class Printer:
    """One language's expressions: its name (for messages), how it spells a typed
    constant, and its op table (the shared `CODE_FOR_OP` with its overrides)."""

    language: str
    literal: LiteralPrinter
    code_for_op: Mapping[Op, Formatter]

    def render(self, op: Op, dtype: DType, *operands: str) -> str:
        """`op` applied to `operands`, whose dtype is `dtype` (a comparison's result is
        the language's bool; that is the formatter's business)."""
        formatter = self.code_for_op.get(op)
        if formatter is None:
            raise UnsupportedOp(f"{self.language} has no spelling of {op.value}", op=op.value)
        if len(operands) != ARITY[op]:
            raise TypeError(f"{op.value} takes {ARITY[op]} operands, not {len(operands)}")
        return formatter(self, dtype, *operands)


def infix(symbol: str, on_bool: str | None = None) -> Formatter:
    """`(a symbol b)`; on bools `(a on_bool b)` where the op means another operator there
    (a bool add is or, a bool mul is and: both wrap to 0/1 as the interpreter's do)."""

    def formatter(p: Printer, dtype: DType, a: str, b: str) -> str:
        sym = on_bool if on_bool is not None and dtype is DType.BOOL else symbol
        return f"({a} {sym} {b})"

    return formatter


def _reciprocal(p: Printer, dtype: DType, x: str) -> str:
    return f"({p.literal(1.0, dtype)} / {x})"


#: The spellings C and Triton share: infix arithmetic and comparisons, `one / x`.
CODE_FOR_OP: Mapping[Op, Formatter] = MappingProxyType(
    {
        Op.RECIP: _reciprocal,
        Op.ADD: infix("+", on_bool="|"),
        Op.MUL: infix("*", on_bool="&"),
        Op.CMPLT: infix("<"),
        Op.CMPEQ: infix("=="),
    }
)


def identity(op: Op, dtype: DType) -> int | float:
    """The value a reduction of `dtype` values starts from: 0 for a sum; for a max the
    least value of the type (-inf, the integer minimum, or False)."""
    if op is Op.SUM:
        return 0
    if op is not Op.RMAX:
        raise UnsupportedOp(f"{op.value} is not a reduction", op=op.value)
    if dtype is DType.BOOL:
        return 0
    return -math.inf if dtype.is_float else int(np.iinfo(dtype.np).min)
