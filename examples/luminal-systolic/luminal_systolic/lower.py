"""luminal's schedule -> an SA-128 program.

Every kernel of the schedule becomes tiles of at most 128 x 128 elements:

- a contraction (matmul, linear layer) walks its output in (m, n) tiles; for each it
  streams K in 128-deep slices (LOAD a, LOAD b, MATMUL into the accumulator tile),
  then runs the fused epilogue (bias, activation, residual) on the vector unit and
  stores the tile;
- an elementwise kernel walks its last two axes in tiles and evaluates its expression
  on the vector unit.

Views (reshape, permute, expand, slice) cost nothing: luminal's index arithmetic turns
each operand into an affine offset, and the DMA engine's (count, stride) pattern is that
offset's coefficients.  What the chip cannot do (reductions other than contractions,
gathers, padding, non-f32 data, a view whose offset is not affine in the tile) is an
`UnsupportedOp` naming the node, raised at compile time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from luminal.compiler.ir import DType, Op
from luminal.compiler.ir.ops import ELEMENTWISE
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.indexing import row_major, unflatten, view_source
from luminal.compiler.schedule.memory import align
from luminal.compiler.schedule.symbolic import Lin, Var
from luminal.errors import UnsupportedOp
from luminal_systolic.isa import (
    REGIONS,
    SLOTS,
    TILE,
    Act,
    Fill,
    Fn,
    Instruction,
    Load,
    MatMul,
    Store,
)

VIEWS = (Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE)
FNS = {
    Op.EXP2: Fn.EXP2,
    Op.LOG2: Fn.LOG2,
    Op.SIN: Fn.SIN,
    Op.SQRT: Fn.SQRT,
    Op.RECIP: Fn.RECIP,
    Op.ADD: Fn.ADD,
    Op.MUL: Fn.MUL,
    Op.MAX: Fn.MAX,
    Op.CMPLT: Fn.CMPLT,
    Op.CMPEQ: Fn.CMPEQ,
    Op.WHERE: Fn.WHERE,
}


@dataclass(frozen=True)
class Lowered:
    program: tuple[Instruction, ...]
    weights: bytes  # the schedule's constants, then those only this program reads


@dataclass(frozen=True)
class _Tile:
    """One tile of a kernel's iteration space: rows along `r`, columns along `c`."""

    r: Var | None
    c: Var | None
    r0: int
    c0: int
    rows: int
    cols: int


def lower(sched: Schedule) -> Lowered:
    w = _Writer(sched)
    for k in sched.kernels:
        w.kernel(k)
    return Lowered(tuple(w.code), w.weights())


class _Writer:
    def __init__(self, sched: Schedule) -> None:
        self.s = sched
        self.g = sched.graph
        self.mat = sched.part.materialized
        self.code: list[Instruction] = []
        self.extra: dict[int, int] = {}  # unmaterialized constant -> byte offset in weights
        self.extra_end = sched.weights_bytes

    # ---- kernels -------------------------------------------------------------------
    def kernel(self, k: Kernel) -> None:
        if k.kind == "contraction" and k.contraction is not None:
            self.contraction(k)
        elif k.kind == "elementwise":
            self.elementwise(k)
        else:
            node = self.g.nodes[k.node if k.reduction is None else k.reduction]
            raise UnsupportedOp(
                f"the systolic backend runs contractions and elementwise kernels, not a "
                f"{k.kind} ({node.op.name} over shape {node.shape})",
                op=node.op.name,
                node=f"%{k.node}",
            )

    def elementwise(self, k: Kernel) -> None:
        node = self.g.nodes[k.node]
        idx = tuple(Lin.of(Var(f"e{d}", n)) if n > 1 else Lin() for d, n in enumerate(node.shape))
        vs = [Var(f"e{d}", n) for d, n in enumerate(node.shape) if n > 1]
        r, c = (None, vs[-1]) if len(vs) < 2 else (vs[-2], vs[-1])
        if not vs:
            r = c = None
        batch = [v for v in vs if v not in (r, c)]
        for values in itertools.product(*(range(v.size) for v in batch)):
            sub = {v: Lin(const=x) for v, x in zip(batch, values, strict=True)}
            at = tuple(e.substitute(sub) for e in idx)
            for tile in _tiles(r, c):
                # A copy kernel (an output that is an input, a constant or a second name for
                # a value) reads its node where it lives instead of computing it.
                root = k.node if self.s.homes.get(k.node) == k.dest else -1
                slot = _Eval(self, tile, root, None, None).value(k.node, at)
                self.store(k, slot, row_major(at, node.shape), tile)

    def contraction(self, k: Kernel) -> None:
        p = k.contraction
        assert p is not None
        cl = p.loops
        reduced = [v for v in cl.loops if v in cl.reduced]
        if not reduced:
            raise UnsupportedOp("a contraction with nothing to reduce", node=f"%{k.node}")
        inner, outer = reduced[-1], reduced[:-1]
        batch = [v for v in cl.loops if v not in cl.reduced and v not in (p.m, p.n)]
        (xb, xo), (yb, yo) = cl.x, cl.y
        rnode = k.reduction if k.reduction is not None else k.node
        for values in itertools.product(*(range(v.size) for v in batch)):
            sub = {v: Lin(const=x) for v, x in zip(batch, values, strict=True)}
            out = cl.out.substitute(sub)
            for tile in _tiles(p.m, p.n):
                acc = 0
                first = True
                for rvalues in itertools.product(*(range(v.size) for v in outer)):
                    rsub = {**sub, **{v: Lin(const=x) for v, x in zip(outer, rvalues, strict=True)}}
                    for k0 in range(0, inner.size, TILE):
                        kt = min(TILE, inner.size - k0)
                        a = _Tile(tile.r, inner, tile.r0, k0, tile.rows, kt)
                        b = _Tile(inner, tile.c, k0, tile.c0, kt, tile.cols)
                        self.load(1, xb, xo.substitute(rsub), a, k.node)
                        self.load(2, yb, yo.substitute(rsub), b, k.node)
                        self.code.append(MatMul(acc, 1, 2, not first))
                        first = False
                if k.reduction is None:
                    self.store(k, acc, out, tile)
                    continue
                enode = self.g.nodes[k.node]
                eidx = unflatten(out, enode.shape)
                ev = _Eval(self, tile, k.node, rnode, acc)
                slot = ev.value(k.node, eidx)
                self.store(k, slot, row_major(eidx, enode.shape), tile)

    # ---- memory --------------------------------------------------------------------
    def load(self, slot: int, buf: int, flat: Lin, tile: _Tile, at: int) -> None:
        region, index, base = self.address(buf, at)
        offset, dims = _pattern(flat, tile, at)
        self.code.append(Load(slot, region, index, base + offset, dims))

    def store(self, k: Kernel, slot: int, flat: Lin, tile: _Tile) -> None:
        dtype = self.g.nodes[k.node].dtype
        if dtype is not DType.F32:
            raise UnsupportedOp(
                f"the systolic backend computes in f32; %{k.node} is {dtype.value}",
                node=f"%{k.node}",
            )
        if k.dest.kind in ("input", "output"):
            region, index, base = REGIONS.index(k.dest.kind), k.dest.index, 0
        else:
            region, index, base = REGIONS.index(k.dest.kind), 0, k.dest.index // 4
        offset, dims = _pattern(flat, tile, k.node)
        self.code.append(Store(slot, region, index, base + offset, dims))

    def address(self, buf: int, at: int) -> tuple[int, int, int]:
        """(region, index, offset in f32 elements) of a buffer: its home in the schedule,
        or, for a constant only this backend reads, its place after the schedule's."""
        dtype = self.s.dtype(buf)
        if dtype is not DType.F32:
            raise UnsupportedOp(
                f"the systolic backend computes in f32; buffer %{buf} is {dtype.value}",
                node=f"%{at}",
            )
        if buf in self.extra:
            return REGIONS.index("weight"), 0, self.extra[buf] // 4
        place = self.s.homes[buf]
        if place.kind in ("input", "output"):
            return REGIONS.index(place.kind), place.index, 0
        return REGIONS.index(place.kind), 0, place.index // 4

    def constant(self, i: int) -> None:
        """Give an unmaterialized constant (one the CPU inlines) a place in the weights."""
        if i not in self.extra:
            self.extra[i] = self.extra_end
            self.extra_end = align(self.extra_end + self.g.consts[self.g.nodes[i].arg].nbytes)

    def weights(self) -> bytes:
        blob = bytearray(self.extra_end)
        for node, offset in self.s.weights:
            data = np.ascontiguousarray(self.s.weight_array(node)).tobytes()
            blob[offset : offset + len(data)] = data
        for node, offset in self.extra.items():
            data = np.ascontiguousarray(self.g.consts[self.g.nodes[node].arg]).tobytes()
            blob[offset : offset + len(data)] = data
        return bytes(blob)


class _Eval:
    """One tile's expression on the vector unit: node values as scratchpad slots."""

    def __init__(
        self, w: _Writer, tile: _Tile, root: int, reduction: int | None, acc: int | None
    ) -> None:
        self.w = w
        self.tile = tile
        self.root = root
        self.reduction = reduction
        self.acc = acc
        self.next = 0 if acc is None else acc + 1
        self.memo: dict[tuple[int, tuple[Lin, ...]], int] = {}

    def slot(self) -> int:
        if self.next >= SLOTS:
            raise UnsupportedOp(
                f"an expression needs more than {SLOTS} scratchpad tiles", node=f"%{self.root}"
            )
        self.next += 1
        return self.next - 1

    def value(self, i: int, idx: tuple[Lin, ...]) -> int:
        key = (i, idx)
        if key not in self.memo:
            self.memo[key] = self._value(i, idx)
        return self.memo[key]

    def _value(self, i: int, idx: tuple[Lin, ...]) -> int:
        g, w = self.w.g, self.w
        node = g.nodes[i]
        if i == self.reduction:
            assert self.acc is not None
            return self.acc
        if i != self.root and (i in w.mat or node.op is Op.INPUT):
            dst = self.slot()
            w.load(dst, i, row_major(idx, node.shape), self.tile, self.root)
            return dst
        if node.op is Op.CONST:
            value = g.consts[node.arg]
            dst = self.slot()
            if value.size == 1:
                scalar = float(value.reshape(()))
                w.code.append(Fill(dst, self.tile.rows, self.tile.cols, scalar))
            else:
                w.constant(i)
                w.load(dst, i, row_major(idx, node.shape), self.tile, self.root)
            return dst
        if node.op in VIEWS:
            src, _ = view_source(node, g.nodes[node.src[0]].shape, idx)
            return self.value(node.src[0], src)
        if node.op is Op.CAST and node.dtype in (DType.F32, DType.BOOL):
            x = self.value(node.src[0], idx)
            dst = self.slot()
            w.code.append(Act(Fn.TO_F32 if node.dtype is DType.F32 else Fn.TO_BOOL, dst, (x,)))
            return dst
        if node.op in FNS and node.op in ELEMENTWISE:
            srcs = tuple(self.value(s, idx) for s in node.src)
            dst = self.slot()
            w.code.append(Act(FNS[node.op], dst, srcs))
            return dst
        raise UnsupportedOp(
            f"the systolic vector unit has no {node.op.name} ({node.dtype.value})",
            op=node.op.name,
            node=f"%{i}",
        )


def _tiles(r: Var | None, c: Var | None) -> list[_Tile]:
    rows = r.size if r is not None else 1
    cols = c.size if c is not None else 1
    return [
        _Tile(r, c, r0, c0, min(TILE, rows - r0), min(TILE, cols - c0))
        for r0 in range(0, rows, TILE)
        for c0 in range(0, cols, TILE)
    ]


def _pattern(flat: Lin, tile: _Tile, at: int) -> tuple[int, tuple[tuple[int, int], ...]]:
    """The DMA pattern of `flat` over a tile: (offset, ((rows, stride), (cols, stride)))."""
    allowed = {v for v in (tile.r, tile.c) if v is not None}
    for atom, _ in flat.terms:
        if not isinstance(atom, Var) or atom not in allowed:
            raise UnsupportedOp(
                "a view whose index the DMA engine cannot express as strides "
                f"({flat.c()} over a tile of {', '.join(v.name for v in allowed) or 'one element'})",
                node=f"%{at}",
            )
    sr = flat.coeff(tile.r) if tile.r is not None else 0
    sc = flat.coeff(tile.c) if tile.c is not None else 0
    return flat.const + sr * tile.r0 + sc * tile.c0, ((tile.rows, sr), (tile.cols, sc))
