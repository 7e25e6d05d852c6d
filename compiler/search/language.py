"""The e-graph's term language, as one table derived from the IR's op enum.

    ir/ops.py  Op, its groups and ARITY
        |
    Term       one member per e-graph constructor: its egglog name and primitive params;
        |      the IR op it encodes, its kind and operand count follow from `ops.py`
        |
        +-- terms.py     the egglog `Tensor` constructors, generated from the table
        +-- analyses.py  shape and dtype rules by kind
        +-- encoder.py   IR node -> term (params read from the node by `Source`)
        +-- snapshot.py  egglog rows -> ENode(term, children, params)
        +-- decode.py, fold.py, choice.py   dispatch on `Term` and its kind

A member named like an IR op (`MUL`) encodes that op; the others exist only in the
e-graph: `FILL` (a constant whose every element is one value, so egglog folds arithmetic
on it with its own f64 primitives) and `CONCAT` (made by horizontal fusion, decoded as two
pads and an add).  Adding an op to the e-graph is one row here; a rule that rewrites it
imports its constructor from `terms` by its egglog name.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from luminal.compiler.ir.ops import (
    ARITY,
    BINARY,
    INDEXING,
    REDUCE,
    SOURCES,
    TERNARY,
    UNARY,
    VIEW,
    Op,
)


class Sort(enum.Enum):
    """The egglog sort of a primitive parameter; the value is egglog's name for it."""

    STRING = "String"
    F64 = "f64"
    I64 = "i64"
    OBJECT = "PyObject"  # a Python tuple (shapes, axes, specs), hashed by value


class Source(enum.Enum):
    """Where a parameter's value comes from when an IR node is encoded."""

    ARG = "arg"  # the node's arg: a name, an axis, a tuple
    ARG_AND_SHAPE = "arg+shape"  # (arg, shape): a slice's spec carries its result length
    SHAPE = "shape"  # the node's shape
    DTYPE = "dtype"  # the node's dtype name
    EGRAPH = "e-graph"  # not read from an IR node: a literal's value, an axis a rule chose


class Kind(enum.Enum):
    """The family a term belongs to, so a rule or a cost can treat it at once."""

    SOURCE = "source"
    UNARY = "unary"
    BINARY = "binary"
    TERNARY = "ternary"
    REDUCE = "reduce"
    INDEXING = "indexing"
    VIEW = "view"
    JOIN = "join"  # two operands joined along an axis (e-graph only)


@dataclass(frozen=True)
class Param:
    """A primitive argument of a constructor (after its tensor operands)."""

    name: str
    sort: Sort
    source: Source


def _arg(name: str, sort: Sort = Sort.OBJECT) -> Param:
    return Param(name, sort, Source.ARG)


_SHAPE = Param("shape", Sort.OBJECT, Source.SHAPE)
_DTYPE = Param("dtype", Sort.STRING, Source.DTYPE)
_GROUPS = (
    (SOURCES, Kind.SOURCE),
    (UNARY, Kind.UNARY),
    (BINARY, Kind.BINARY),
    (TERNARY, Kind.TERNARY),
    (REDUCE, Kind.REDUCE),
    (INDEXING, Kind.INDEXING),
    (VIEW, Kind.VIEW),
)
#: Operand counts of the kinds that have no IR op to read them from.
_ARITY = {Kind.SOURCE: 0, Kind.JOIN: 2}


class Term(enum.Enum):
    """One member per constructor of the e-graph's `Tensor` sort.

    A row is (egglog name, primitive params), plus the kind for e-graph-only terms."""

    INPUT = "Input", (_arg("name", Sort.STRING),)  # opaque: shape and dtype are facts
    CONST = "Const", (_arg("key", Sort.STRING),)  # opaque; the array stays in Python
    FILL = "Fill", (Param("value", Sort.F64, Source.EGRAPH), _SHAPE, _DTYPE), Kind.SOURCE
    IOTA = "Iota", (_arg("axis", Sort.I64), _SHAPE, _DTYPE)
    EXP2 = "Exp2"
    LOG2 = "Log2"
    SIN = "Sin"
    SQRT = "Sqrt"
    RECIP = "Recip"
    CAST = "Cast", (_DTYPE,)
    ADD = "Add"
    MUL = "Mul"
    MAX = "Max"
    MOD = "Mod"
    IDIV = "Idiv"
    CMPLT = "Lt"
    CMPEQ = "Eq"
    WHERE = "Where"
    SUM = "Sum", (_arg("axes"),)
    RMAX = "Rmax", (_arg("axes"),)
    GATHER = "Gather", (_arg("axis", Sort.I64),)
    SCATTER = "Scatter", (_arg("axis", Sort.I64),)
    RESHAPE = "Reshape", (_arg("shape"),)
    PERMUTE = "Permute", (_arg("perm"),)
    EXPAND = "Expand", (_arg("shape"),)
    PAD = "Pad", (_arg("spec"),)  # the IR arg: ((before, after) per axis, fill value)
    SLICE = "Slice", (Param("spec", Sort.OBJECT, Source.ARG_AND_SHAPE),)  # (arg, shape)
    CONCAT = "Concat", (Param("axis", Sort.OBJECT, Source.EGRAPH),), Kind.JOIN

    def __init__(
        self, egg_name: str, params: tuple[Param, ...] = (), kind: Kind | None = None
    ) -> None:
        self.egg_name = egg_name
        self.params = params
        self.op: Op | None = Op.__members__.get(self.name)
        if kind is None:
            assert self.op is not None, f"{self.name}: an e-graph-only term names its kind"
            kind = next(k for group, k in _GROUPS if self.op in group)
        self.kind = kind
        self.arity = ARITY[self.op] if self.op is not None else _ARITY[kind]

    def __repr__(self) -> str:
        return f"Term.{self.name}"

    @classmethod
    def of(cls, op: Op) -> Term:
        """The term that encodes IR op `op`."""
        return BY_OP[op]

    @classmethod
    def named(cls, egg_name: str) -> Term:
        """The term whose egglog constructor is called `egg_name`."""
        return BY_NAME[egg_name]

    @classmethod
    def of_kind(cls, kind: Kind) -> tuple[Term, ...]:
        return tuple(t for t in cls if t.kind is kind)


BY_OP: Mapping[Op, Term] = MappingProxyType({t.op: t for t in Term if t.op is not None})
BY_NAME: Mapping[str, Term] = MappingProxyType({t.egg_name: t for t in Term})

__all__ = ["BY_NAME", "BY_OP", "Kind", "Param", "Sort", "Source", "Term"]
