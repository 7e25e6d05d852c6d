"""Contraction kernels: a SUM over a MUL of two affine loads, planned for register blocking.

`contraction_loops` turns the IR pattern into loops and flat offsets (splitting loop
variables where a reshape divides them).  `plan` picks the register tile's axes: `n`, an
output loop that only operand Y moves along (its inner loop, vectorized), and `m`, one
that only X moves along.  When Y is a constant whose stride along `n` is not 1, its
elements are re-laid out at compile time (weight packing) so that the inner loop reads
contiguous memory: a convolution's [Cout, Cin, kh, kw] weights become [Cin, kh, kw, Cout].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from luminal.compiler.ir import Graph, Op
from luminal.compiler.schedule.indexing import merge_loops, row_major, split_loops, trace_load
from luminal.compiler.schedule.symbolic import Lin, Var


@dataclass(frozen=True)
class ContractionLoops:
    """Every loop variable, which are reduced, and the flat offsets into both operands'
    buffers (buffer node, offset) and into the output."""

    loops: tuple[Var, ...]
    reduced: frozenset[Var]
    x: tuple[int, Lin]
    y: tuple[int, Lin]
    out: Lin


@dataclass(frozen=True)
class ContractionPlan:
    loops: ContractionLoops  # x moves along m, y along n (operands swapped if needed)
    m: Var | None
    n: Var
    packed: np.ndarray | None = None  # y's constant re-laid out; y's offset already refers to it


def contraction_loops(graph: Graph, mat: frozenset[int], i: int) -> ContractionLoops | None:
    node = graph.nodes[i]
    mul = graph.nodes[node.src[0]]
    idx = tuple(Lin.of(Var(f"a{k}", d)) if d > 1 else Lin() for k, d in enumerate(mul.shape))
    loads = [trace_load(graph, mat, s, idx) for s in mul.src]
    if any(ld is None for ld in loads):
        return None
    (xb, xo), (yb, yo) = loads  # type: ignore[misc]
    out = row_major(tuple(Lin() if k in node.arg else e for k, e in enumerate(idx)), node.shape)
    loops = [Var(f"a{k}", d) for k, d in enumerate(mul.shape) if d > 1]
    reduced = frozenset(Var(f"a{k}", d) for k, d in enumerate(mul.shape) if d > 1 and k in node.arg)
    loops, reduced, (xo, yo, out) = split_loops(loops, reduced, [xo, yo, out])
    if not (xo.is_affine and yo.is_affine and out.is_affine):
        return None
    loops, reduced, (xo, yo, out) = merge_loops(loops, reduced, [xo, yo, out])
    return ContractionLoops(tuple(loops), reduced, (xb, xo), (yb, yo), out)


def plan(graph: Graph, cl: ContractionLoops) -> ContractionPlan | None:
    """Choose (m, n) and whether to pack Y; None when no output loop suits blocking."""
    found = plans(graph, cl, 1)
    return found[0] if found else None


def plans(graph: Graph, cl: ContractionLoops, most: int = 3) -> tuple[ContractionPlan, ...]:
    """Up to `most` orientations of the register tile, best first by a rule of thumb.

    The first is the default: an `n` that Y reads contiguously or that packing makes
    contiguous, with an `m`, the longest such `n` (on a tie, one the output is stored
    along: attention's Q.K^T, where neither operand is), and the longest `m`.  The others are
    the same `n` with the `m` along which the output is contiguous, and the next-best
    distinct `n`: which one runs faster depends on what the rule cannot see (how the output
    is stored, how long the reduction is), so the search measures them; a convolution's
    1x1 product with a short reduction runs several times faster with `n` along the output
    positions (contiguous stores; one loop, `indexing.merge_loops`) than along the output
    channels."""
    outs = [v for v in cl.loops if v not in cl.reduced]
    scored = []
    for n in outs:
        for swap in (False, True):
            (_, x), (yb, y) = (cl.y, cl.x) if swap else (cl.x, cl.y)
            if y.coeff(n) == 0 or x.coeff(n) != 0:
                continue
            packable = graph.nodes[yb].op is Op.CONST
            ms = [m for m in outs if m != n and x.coeff(m) != 0 and y.coeff(m) == 0]
            unit = abs(y.coeff(n)) == 1
            # Last, on a tie: an n along which the output is stored contiguously, so a
            # register tile's rows are stored as vectors (attention's Q.K^T reads both
            # operands along k: by n = key, not query, no transposed store).
            stored_n = bool(ms) and abs(cl.out.coeff(n)) == 1
            score = (unit or packable, bool(ms), n.size, unit, stored_n)
            longest = max(ms, key=lambda v: v.size, default=None)
            stored = [m for m in ms if abs(cl.out.coeff(m)) == 1 and m != longest]
            scored.append((score, (longest, *stored[:1]), n, swap))
    out: list[ContractionPlan] = []
    for score, ms, n, swap in sorted(scored, key=lambda t: t[0], reverse=True):
        if any(p.n == n for p in out) or (out and not (score[0] and score[1])):
            continue  # one n once; an alternative must be a real register tile
        out += [_planned(graph, cl, m, n, swap) for m in ms]
    return tuple(out[:most])


#: Column panel width of a weight laid out in panels (`_panels`): the widest register
#: tile's (AVX-512's 32 floats; AVX2's 16-wide tiles read half a panel each).
PANEL = 32
#: Up to this many rows, a contraction with a constant Y reads Y from panels: each row
#: tile then streams Y once, and in place a [K, N] weight is read one row of N apart per
#: k (a new page every few k's: measured 10-19 GB/s against 27-33 GB/s from panels for
#: GPT-2's 768 x 50257 head, 1 and 2 threads).  More rows amortize a panel copy.  Eight
#: rows, an ImageNet head at the serving batch (one AVX-512 row tile), 2 threads:
#: 8 x 1024 x 1000 ran 143 -> 104 us with its weight in cache and 629 -> 209 us with it
#: out of cache (as a head's weight is in a model run: read once per inference);
#: 8 x 2048 x 1000 164 -> 179 and 828 -> 341 us.  At 16 rows panels lost in cache
#: (188 -> 230 us) and at 32 rows out of it too nearly nothing was won (458 -> 413 us).
PANEL_ROWS = 8


def _planned(
    graph: Graph, cl: ContractionLoops, m: Var | None, n: Var, swap: bool
) -> ContractionPlan:
    loops = ContractionLoops(
        cl.loops, cl.reduced, *((cl.y, cl.x) if swap else (cl.x, cl.y)), cl.out
    )
    yb, yo = loops.y
    if (
        graph.nodes[yb].op is Op.CONST
        and _short(loops, n)
        and (width := panel_width(n.size)) is not None
    ):
        return _panels(graph.consts[graph.nodes[yb].arg], loops, m, n, width)
    if abs(yo.coeff(n)) == 1 or graph.nodes[yb].op is not Op.CONST:
        return ContractionPlan(loops, m, n)
    packed, offset = _pack(graph.consts[graph.nodes[yb].arg], yo, cl.loops, n)
    loops = ContractionLoops(loops.loops, loops.reduced, loops.x, (yb, offset), loops.out)
    return ContractionPlan(loops, m, n, packed)


def panel_width(n: int) -> int | None:
    """The column panel width for N columns: PANEL when it divides N, else the narrowest
    multiple of 8 above PANEL that does (an ImageNet head's 1000 columns: 25 panels of 40,
    each a 32-wide tile and an 8-wide one), None when none up to 4 PANEL does or N is a
    single panel."""
    if n <= PANEL:
        return None
    if n % PANEL == 0:
        return PANEL
    return next((w for w in range(PANEL + 8, 4 * PANEL + 1, 8) if n % w == 0 and w < n), None)


def _short(loops: ContractionLoops, n: Var) -> bool:
    """Whether the product has at most PANEL_ROWS rows (the output positions Y does not
    move along)."""
    _, yo = loops.y
    rows = 1
    for v in loops.loops:
        if v not in loops.reduced and v != n and yo.coeff(v) == 0:
            rows *= v.size
    return rows <= PANEL_ROWS


def _panels(
    weight: np.ndarray, loops: ContractionLoops, m: Var | None, n: Var, width: int
) -> ContractionPlan:
    """Y in column panels: n split as width * nh + nl, the weight re-laid out as
    [nh, (Y's other variables), nl], so the panel of one nh is one contiguous block; nh
    becomes a batch variable of the product and nl its column."""
    hi, lo = Var(f"{n.name}p", n.size // width), Var(f"{n.name}q", width)
    sub = {n: Lin.of(hi) * width + Lin.of(lo)}
    at = loops.loops.index(n)
    names = (*loops.loops[:at], hi, lo, *loops.loops[at + 1 :])
    (xb, xo), (yb, yo) = loops.x, loops.y
    yo = yo.substitute(sub)
    axes = [hi] + [v for v in names if yo.coeff(v) != 0 and v not in (hi, lo)] + [lo]
    packed, offset = _pack(weight, yo, names, lo, axes)
    split = ContractionLoops(
        names, loops.reduced, (xb, xo.substitute(sub)), (yb, offset), loops.out.substitute(sub)
    )
    return ContractionPlan(split, m, lo, packed)


def _pack(
    weight: np.ndarray,
    offset: Lin,
    loops: tuple[Var, ...],
    n: Var,
    axes: list[Var] | None = None,
) -> tuple[np.ndarray, Lin]:
    """Gather the elements `offset` reads into a new array whose axes are `axes` (by
    default the variables Y moves along in loop order, `n` last)."""
    axes = axes or [v for v in loops if offset.coeff(v) != 0 and v != n] + [n]
    grids = np.meshgrid(*[np.arange(v.size) for v in axes], indexing="ij")
    flat = np.full(grids[0].shape, offset.const, dtype=np.int64)
    for v, grid in zip(axes, grids, strict=True):
        flat += offset.coeff(v) * grid
    packed = np.ascontiguousarray(weight.reshape(-1)[flat])
    new = Lin()
    stride = 1
    for v in reversed(axes):
        new = new + Lin.of(v) * stride
        stride *= v.size
    return packed, new
