"""A contraction seen as a batch of matrix products: which loop variables are rows, which
is the vectorized column, which are reduced and which are the batch.

    out[batch, rows, n] = sum_k X[batch, rows, k] * Y[batch, k, n]

`n` is the plan's column variable (Y moves along it, X does not).  Rows are every other
output variable that Y does not move along; they are flattened into one row index so a
convolution's output positions (oh, ow) form full register tiles even when ow is short.
The batch is every output variable Y moves along besides n (an attention head).  The
reduction variables, in loop order, are flattened into one k index; an operand's offset
along k is a constant stride when the variables merge (a matmul, a 1x1 convolution) and a
table of offsets otherwise (a 3x3 convolution's (cin, kh, kw)).
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.compiler.schedule.contraction import ContractionPlan
from luminal.compiler.schedule.symbolic import Lin, Var


@dataclass(frozen=True)
class Axis:
    """Variables flattened into one index, outermost first, with the flat size."""

    vars: tuple[Var, ...]

    @property
    def size(self) -> int:
        n = 1
        for v in self.vars:
            n *= v.size
        return n

    def unflatten(self, flat: str) -> list[tuple[Var, str]]:
        """C expressions for each variable given the flat index `flat`."""
        out = []
        stride = self.size
        for k, v in enumerate(self.vars):
            stride //= v.size
            e = flat if stride == 1 else f"({flat}) / {stride}"
            if k > 0:
                e = f"({e}) % {v.size}"
            out.append((v, e))
        return out

    def stride(self, offset: Lin) -> int | None:
        """The constant step of `offset` per flat index, when the variables merge."""
        if not self.vars:
            return 0
        step = offset.coeff(self.vars[-1])
        inner = 1
        for v in reversed(self.vars):
            if offset.coeff(v) != step * inner:
                return None
            inner *= v.size
        return step

    def offsets(self, offset: Lin) -> list[int]:
        """`offset`'s part along these variables, for every flat index in order."""
        out = [0]
        for v in self.vars:
            c = offset.coeff(v)
            out = [base + c * i for base in out for i in range(v.size)]
        return out


@dataclass(frozen=True)
class GemmLayout:
    plan: ContractionPlan
    batch: Axis
    rows: Axis
    n: Var
    k: Axis

    @staticmethod
    def of(plan: ContractionPlan) -> GemmLayout:
        cl = plan.loops
        _, yoff = cl.y
        outs = [v for v in cl.loops if v not in cl.reduced and v != plan.n]
        rows = tuple(v for v in outs if yoff.coeff(v) == 0)
        batch = tuple(v for v in outs if yoff.coeff(v) != 0)
        k = tuple(v for v in cl.loops if v in cl.reduced)
        return GemmLayout(plan, Axis(batch), Axis(rows), plan.n, Axis(k))

    @property
    def x(self) -> tuple[int, Lin]:
        return self.plan.loops.x

    @property
    def y(self) -> tuple[int, Lin]:
        return self.plan.loops.y

    @property
    def out(self) -> Lin:
        return self.plan.loops.out

    def part(self, offset: Lin, axis: Axis) -> Lin:
        """`offset`'s terms along `axis` only."""
        return Lin(tuple((a, c) for a, c in offset.terms if a in axis.vars), 0)

    def without(self, offset: Lin, *axes: Axis | Var) -> Lin:
        """`offset` with the terms of these axes (or variables) dropped."""
        drop: set[object] = set()
        for a in axes:
            drop |= set(a.vars) if isinstance(a, Axis) else {a}
        return Lin(tuple((a, c) for a, c in offset.terms if a not in drop), offset.const)


@dataclass(frozen=True)
class GemmShape:
    batch: int
    m: int
    n: int
    k: int

    @staticmethod
    def of(plan: ContractionPlan) -> GemmShape:
        lay = GemmLayout.of(plan)
        return GemmShape(lay.batch.size, lay.rows.size, lay.n.size, lay.k.size)
