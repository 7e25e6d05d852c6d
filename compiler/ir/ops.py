"""The IR vocabulary: one enum, with named groups so a rule can match a family at once.

Each op's `arg` (the one op-specific field of a node) is documented here and checked by
`luminal.compiler.ir.spec`; its meaning is defined by `luminal.compiler.ir.interpreter`.

Binary and ternary ops take operands of identical shape (broadcasting is an explicit
EXPAND view); arithmetic operands also share one dtype.  Reductions keep the reduced
axes with size 1.
"""

from __future__ import annotations

import enum


class Op(enum.Enum):
    # sources
    INPUT = "input"  # arg: input name
    CONST = "const"  # arg: key into Graph.consts
    IOTA = "iota"  # arg: axis; value = index along that axis
    # unary
    EXP2 = "exp2"
    LOG2 = "log2"
    SIN = "sin"
    SQRT = "sqrt"
    RECIP = "recip"
    CAST = "cast"  # to the node's dtype; float->int truncates toward zero
    # binary
    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MOD = "mod"  # C semantics: result has the sign of the dividend (fmod)
    IDIV = "idiv"  # integers only, truncates toward zero
    CMPLT = "cmplt"  # -> bool
    CMPEQ = "cmpeq"  # -> bool
    # ternary
    WHERE = "where"  # (cond: bool, a, b)
    # reductions; arg: tuple of reduced axes (kept with size 1)
    SUM = "sum"
    RMAX = "rmax"
    # indexing
    GATHER = "gather"  # (data, indices); arg: axis; indices in [0, dim)
    SCATTER = "scatter"  # (data, indices, updates); arg: axis; ScatterElements, no reduction
    # views: move no data until materialized
    RESHAPE = "reshape"  # arg: new shape (same element count)
    PERMUTE = "permute"  # arg: axis order
    EXPAND = "expand"  # arg: new shape; only size-1 axes grow, rank unchanged
    PAD = "pad"  # arg: (((before, after), ...), fill value); before/after >= 0
    SLICE = "slice"  # arg: ((start, step), ...) per axis; length is the node's shape

    def __repr__(self) -> str:
        return f"Op.{self.name}"


SOURCES = frozenset({Op.INPUT, Op.CONST, Op.IOTA})
UNARY = frozenset({Op.EXP2, Op.LOG2, Op.SIN, Op.SQRT, Op.RECIP, Op.CAST})
BINARY = frozenset({Op.ADD, Op.MUL, Op.MAX, Op.MOD, Op.IDIV, Op.CMPLT, Op.CMPEQ})
TERNARY = frozenset({Op.WHERE})
COMPARE = frozenset({Op.CMPLT, Op.CMPEQ})
ELEMENTWISE = UNARY | BINARY | TERNARY
REDUCE = frozenset({Op.SUM, Op.RMAX})
INDEXING = frozenset({Op.GATHER, Op.SCATTER})
VIEW = frozenset({Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.PAD, Op.SLICE})

ARITY: dict[Op, int] = {
    **{op: 0 for op in SOURCES},
    **{op: 1 for op in UNARY | REDUCE | VIEW},
    **{op: 2 for op in BINARY},
    Op.WHERE: 3,
    Op.GATHER: 2,
    Op.SCATTER: 3,
}
