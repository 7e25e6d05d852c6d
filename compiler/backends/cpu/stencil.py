"""The generated stencil contraction: a depthwise convolution's shape of product.

    out[outer, v] = sum_k B[outer, k] * A[outer, v * s + offset_k]

A contraction is a stencil when one operand (B, a depthwise convolution's weights) has no
output loop of its own: every output loop it moves along, the other operand (A, the
activations) moves along too.  As a batch of matrix products that is M = 1 per batch
item (`gemm_layout`): the GEMM kernel then packs a K x NR panel of A per output row and
broadcasts one weight at a time, and a 3x3 depthwise convolution ran at 0.5-3 GFLOP/s
(mobilenet_v2, 2 threads), packing and storing far more than it multiplied.

Here the vectorized loop is the output's unit-stride loop `v` (an output row), which A
moves along with stride `s` (1, or a strided convolution's 2) and B does not:

    for each outer index (channel, output row)               [thread pool]
        for each block of JB output columns
            JB accumulators (vector registers), over k: one broadcast weight, JB lanes of A
            store through the fused epilogue

The accumulators are explicit vector registers (`simd.py`'s macros): written as a plain
loop over an accumulator array for the compiler to vectorize, GCC kept the array in
memory and the kernel ran at 3-5 GFLOP/s against 24-41 with registers (3x3, 144 x 56 x 56,
one thread).  The last, shorter block uses masked loads, which never read past the row; a
strided convolution's loads are gathers, except at stride 2, where a vector loads the two
vectors it spans (masked: never past the last element it uses) and keeps the even lanes
(`LUM_VLOADEVEN`, `LUM_VLOADEVENN` for a tail): a gather of 16 lanes is 16 loads
(mobilenet_v2's 96-channel 112 -> 56 depthwise convolution: 1.19 -> 0.53 ms with full
vectors only, 0.54 -> 0.35 ms with a SiLU once tails load this way too).

B may also have one output loop of its own if it is short (`StencilLayout.chan`, at most
`MAX_CHANNELS`), A and B share another and A has output rows of its own besides the
vector's: a grouped convolution's channels within a group, its groups and its output
rows.  A dense convolution's few channels stay the GEMM's and Winograd's, and a batched
matrix product (attention's few query rows: A has no rows of its own) the GEMM's.  A
block of those channels shares each vector load of A, one broadcast weight per channel:

            over k: NV loads of A, then per channel one broadcast weight and NV FMAs
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from luminal.compiler.backends.cpu.gemm import f32_contraction, k_offsets
from luminal.compiler.backends.cpu.gemm_layout import Axis
from luminal.compiler.backends.cpu.padrows import padded_row
from luminal.compiler.backends.cpu.simd import HALF, Isa
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.contraction import ContractionPlan
from luminal.compiler.schedule.symbolic import Lin, Var

if TYPE_CHECKING:
    from luminal.compiler.backends.cpu.codegen import _KernelWriter

#: Output columns per register block: 4 AVX2 vectors (or 2 AVX-512 ones) of
#: accumulators, with registers left for the loads of A.
BLOCK = 32

#: Vector accumulators one item keeps (rows x vectors per row): enough independent FMA
#: chains to hide the FMA latency, with registers left for the loads.
ACCUMULATORS = 8

#: Longest reduction taken (a 7x7 depthwise window is 49; a GEMV's K is a GEMM's job).
MAX_K = 256

#: Narrowest output row worth a (masked) vector loop.
MIN_ROW = 4

#: Most output channels of B's own (`StencilLayout.chan`: a grouped convolution's
#: channels per group) the kernel takes; wider, it is a matrix product (the GEMM's job).
MAX_CHANNELS = 16

#: Vector accumulators a channel block keeps with 32 vector registers (AVX-512), and with
#: 16 (AVX2): the loads of A and one broadcast weight fit beside them.
CHANNEL_ACCUMULATORS = {16: 16, 8: 8}

#: The variants: full-width vectors, and the half-width ISA (`simd.HALF`) for rows
#: shorter than one full vector (a 7x7 map's 7 columns: 7 of 16 AVX-512 lanes, 7 of 8 AVX2).
IMPL = "stencil"
HALF_IMPL = "stencil-half"
IMPLS = (IMPL, HALF_IMPL)

#: Most bytes of padded rows one work item builds on the stack (`Variant.unpad`).
MAX_TILE = 64 << 10

#: Bytes of padded rows an unpadding item builds at most when it takes several row blocks
#: (half of a 32 KiB L1), and the fewest items it leaves the threads.
GROUP_TILE = 16 << 10
GROUP_MIN_ITEMS = 16


@dataclass(frozen=True)
class StencilLayout:
    a: tuple[int, Lin]  # streamed operand: buffer node, offset (moves along `vec`)
    b: tuple[int, Lin]  # broadcast operand (one scalar per outer index and k)
    vec: Var  # the output's unit-stride loop
    outer: Axis  # every other output loop, flattened: the work items
    k: Axis  # the reduced loops, flattened
    # An output loop B moves along and A does not (a grouped convolution's channels
    # within a group): its channels share each load of A.
    chan: Var | None = None

    @staticmethod
    def of(plan: ContractionPlan) -> StencilLayout | None:
        cl = plan.loops
        outs = [v for v in cl.loops if v not in cl.reduced]
        k = Axis(tuple(v for v in cl.loops if v in cl.reduced))
        if not k.vars or k.size > MAX_K:
            return None
        for a, b in ((cl.x, cl.y), (cl.y, cl.x)):
            ao, bo = a[1], b[1]
            own = [v for v in outs if bo.coeff(v) != 0 and ao.coeff(v) == 0]
            shared = any(ao.coeff(v) != 0 and bo.coeff(v) != 0 for v in outs)
            if len(own) > 1 or (own and (own[0].size > MAX_CHANNELS or not shared)):
                continue  # B has rows of its own: a matrix product (a dense convolution)
            vecs = [
                v for v in outs if cl.out.coeff(v) == 1 and ao.coeff(v) > 0 and bo.coeff(v) == 0
            ]
            if not vecs or vecs[0].size < MIN_ROW:
                continue
            vec = vecs[0]
            rows = [v for v in outs if v != vec and ao.coeff(v) != 0 and bo.coeff(v) == 0]
            if own and not rows:
                continue  # a batched matrix product (attention's), not a window's rows
            outer = Axis(tuple(v for v in outs if v != vec))
            return StencilLayout(a, b, vec, outer, k, own[0] if own else None)
        return None


def legal(sched: Schedule, kernel: Kernel, isa: Isa) -> bool:
    """An f32 contraction of the stencil shape (see the module docstring), on a vector
    ISA with masked loads and gathers (AVX2, AVX-512)."""
    p = kernel.contraction
    return (
        p is not None
        and bool(isa.loadn)
        and StencilLayout.of(p) is not None
        and f32_contraction(sched, kernel)
    )


def half_legal(sched: Schedule, kernel: Kernel, isa: Isa) -> bool:
    """The half-width variant: legal, on an ISA that carries a half one, with output rows
    shorter than one full vector."""
    if isa.name not in HALF or not legal(sched, kernel, isa):
        return False
    assert kernel.contraction is not None
    lay = StencilLayout.of(kernel.contraction)
    return lay is not None and lay.vec.size < isa.width


def unpad_legal(sched: Schedule, kernel: Kernel, isa: Isa) -> bool:
    """Legal, and the streamed operand is a pad whose source the kernel may read
    (`Kernel.fold`), with the padded rows one item reads within `MAX_TILE`."""
    if not legal(sched, kernel, isa) or kernel.fold is None:
        return False
    assert kernel.contraction is not None
    lay = StencilLayout.of(kernel.contraction)
    assert lay is not None
    if lay.a[0] != kernel.fold.pad:
        return False
    hp, width = sched.graph.nodes[kernel.fold.pad].shape[-2:]
    if lay.chan is not None:  # the rows of each of its group's planes
        planes = _planes(lay, hp, width)
        return planes is not None and planes.floats(width) * 4 <= MAX_TILE
    widths = {isa.width, HALF[isa.name].width if isa.name in HALF else isa.width}
    return max(_tile_rows(_span(lay, vw), width) for vw in widths) * width * 4 <= MAX_TILE


def compact_legal(sched: Schedule, kernel: Kernel, isa: Isa) -> bool:
    """`Variant(unpad=True, compact=True)`: unpadding, stride 2 along the row and an even
    step from one output row to the next (a stride-2 window), its tile split by parity
    (`_split_tile`).  Measured (pad + convolution + ReLU against unpadded, 2 threads):
    5x5 windows 1.16-1.28x (144 ch 56 -> 28, 240 ch 28 -> 14), 3x3 0.79-1.05x (the split
    costs about what the permutes it saves did, and doubles the tile in L1)."""
    if not unpad_legal(sched, kernel, isa):
        return False
    assert kernel.contraction is not None
    lay = StencilLayout.of(kernel.contraction)
    assert lay is not None
    if lay.chan is not None or lay.a[1].coeff(lay.vec) != 2:
        return False
    _, row, _ = _blocking(lay, isa.width)
    return row is None or lay.a[1].coeff(row) % 2 == 0


@dataclass(frozen=True)
class PlaneRows:
    """What a grouped convolution's unpadding item builds: `rows` padded rows of each of
    `count` planes (the group's input channels, `step` planes apart), the reduced loop
    `loop` stepping from plane to plane."""

    loop: Var
    count: int
    step: int
    rows: int

    def floats(self, width: int) -> int:
        return self.count * self.rows * width

    def rebased(self, ao: Lin, width: int) -> Lin:
        """A's offset into the tile: one plane of the tile is `rows` rows."""
        terms = tuple((v, self.rows * width if v == self.loop else c) for v, c in ao.terms)
        return Lin(terms, ao.const)


def _planes(lay: StencilLayout, hp: int, wp: int) -> PlaneRows | None:
    """A channel layout's window as planes x rows of one plane: one reduced loop steps
    whole planes of the pad, the rest (and the output row) stay within one plane."""
    ao, plane = lay.a[1], hp * wp
    loops = [v for v in lay.k.vars if ao.coeff(v) != 0 and ao.coeff(v) % plane == 0]
    if len(loops) != 1:
        return None
    rest = Axis(tuple(v for v in lay.k.vars if v != loops[0]))
    span = max(rest.offsets(ao), default=0) + (lay.vec.size - 1) * ao.coeff(lay.vec)
    if span >= plane:
        return None
    return PlaneRows(loops[0], loops[0].size, ao.coeff(loops[0]) // plane, _tile_rows(span, wp))


def _blocking(lay: StencilLayout, vw: int) -> tuple[int, Var | None, int]:
    """Vectors per row block at `vw` lanes, the output loop blocked (if any) and the rows
    per block: B's channels (`StencilLayout.chan`, the largest divisor of their count
    within `CHANNEL_ACCUMULATORS`), else output rows (`_row_block`)."""
    nv = min(BLOCK // vw, -(-lay.vec.size // vw))
    if lay.chan is not None:
        most, c = max(1, CHANNEL_ACCUMULATORS.get(vw, 8) // nv), lay.chan.size
        return nv, lay.chan, max(d for d in range(1, min(most, c) + 1) if c % d == 0)
    row, rows = _row_block(lay, lay.b[1], nv)
    return nv, row, rows


def _span(lay: StencilLayout, vw: int, groups: int = 1) -> int:
    """The last element of A one item of `groups` row blocks reads, past its first: its
    output rows, of the whole window along the whole row (the vector loads never read
    past it)."""
    _, row, rows = _blocking(lay, vw)
    ao = lay.a[1]
    ra = ao.coeff(row) if row is not None else 0
    k_last = max(lay.k.offsets(ao), default=0)
    return (rows * groups - 1) * ra + k_last + (lay.vec.size - 1) * ao.coeff(lay.vec)


def _tile_rows(span: int, width: int) -> int:
    """Padded rows of `width` that `span` elements cover, whatever column they start at."""
    return (width - 1 + span) // width + 1


def _groups(lay: StencilLayout, vw: int, width: int, blocks: int, items: int) -> int:
    """Row blocks one unpadding item computes: the most (a divisor of `blocks`) whose
    padded rows fit `GROUP_TILE`, leaving at least `GROUP_MIN_ITEMS` items.  Each item
    builds the rows its blocks share once: one block of 4 rows of a 3x3 window builds 6
    rows, seven build 30."""
    best = 1
    for g in range(2, blocks + 1):
        rows = _tile_rows(_span(lay, vw, g), width)
        if rows * width * 4 > GROUP_TILE or items // g < GROUP_MIN_ITEMS:
            break
        if blocks % g == 0:
            best = g
    return best


def _padded_rows(
    w: _KernelWriter, out: list[str], ind: str, aoff: str, span: int, tile_rows: int
) -> None:
    """`tile`: the padded rows an item reads from `aoff` (an offset into the pad's
    buffer) to `aoff + span`, built from the pad's source on the stack at the pad's row
    width, `aoff` at `tile + x0`: the item's loads read it as they would the pad's
    buffer."""
    f = w.k.fold
    assert f is not None
    hp, wp = w.g.nodes[f.pad].shape[-2:]
    top = f.widths(w.g)[0][0]
    out += [
        f"{ind}float tile[{tile_rows * wp}] __attribute__((aligned(64)));",
        f"{ind}const int64_t g0 = ({aoff}) / {wp}, x0 = ({aoff}) - g0 * {wp};",
        f"{ind}const int64_t nrows = (x0 + {span}) / {wp} + 1;",
        f"{ind}for (int64_t r = 0; r < nrows; r++) {{",
        f"{ind}    const int64_t plane = (g0 + r) / {hp}, y = g0 + r - plane * {hp} - {top};",
        f"{ind}    float *trow = tile + r * {wp};",
        *padded_row(w, ind + "    ", "trow", "plane", "y"),
        f"{ind}}}",
    ]


def _plane_rows(w: _KernelWriter, out: list[str], ind: str, aoff: str, planes: PlaneRows) -> None:
    """`tile`: for each plane of the group (from the one holding `aoff`, an offset into
    the pad's buffer), the padded rows an item reads, built from the pad's source; `aoff`
    at `tile + x0`, A's offsets re-based (`PlaneRows.rebased`)."""
    f = w.k.fold
    assert f is not None
    hp, wp = w.g.nodes[f.pad].shape[-2:]
    top = f.widths(w.g)[0][0]
    rows = planes.rows
    out += [
        f"{ind}float tile[{planes.floats(wp)}] __attribute__((aligned(64)));",
        f"{ind}const int64_t g0 = ({aoff}) / {wp}, x0 = ({aoff}) - g0 * {wp};",
        f"{ind}const int64_t plane0 = g0 / {hp}, y0 = g0 - plane0 * {hp} - {top};",
        f"{ind}for (int64_t pr = 0; pr < {planes.count * rows}; pr++) {{",
        f"{ind}    const int64_t plane = plane0 + (pr / {rows}) * {planes.step}, y = y0 + pr % {rows};",
        f"{ind}    float *trow = tile + pr * {wp};",
        *padded_row(w, ind + "    ", "trow", "plane", "y"),
        f"{ind}}}",
    ]


def write(
    w: _KernelWriter,
    out: list[str],
    isa: Isa,
    half: bool = False,
    unpad: bool = False,
    compact: bool = False,
) -> None:
    """The kernel in `isa`'s vectors (`LUM_V*`), or in its half-width ISA's (`LUM_H*`);
    with `unpad`, reading the source of the pad it reads (`_padded_rows`), and with
    `compact` too (stride 2, `compact_legal`) from that tile split by parity
    (`_split_tile`)."""
    p = w.k.contraction
    assert p is not None
    lay = StencilLayout.of(p)
    assert lay is not None
    if half:
        isa = HALF[isa.name]
    vm, vt = ("LUM_H", "lum_hf") if half else ("LUM_V", "lum_vf")
    (ab, ao), (bb, bo) = lay.a, lay.b
    pb = w._pointer(bb)
    V, K, sa, VW = lay.vec.size, lay.k.size, ao.coeff(lay.vec), isa.width
    # R rows (output rows sharing each broadcast weight, or B's channels sharing each
    # load of A) of NV vectors each
    NV, row, R = _blocking(lay, VW)
    JB = NV * VW
    outer = lay.outer
    if row is not None and R > 1:
        rb = Var(f"{row.name}b", row.size // R)
        outer = Axis(tuple(rb if v == row else v for v in outer.vars))
        to_block = {row: Lin.of(rb) * R}
        ao_block, bo_block = ao.substitute(to_block), bo.substitute(to_block)
        out_block = p.loops.out.substitute(to_block)
    else:
        ao_block, bo_block, out_block = ao, bo, p.loops.out
    ra = ao.coeff(row) if row is not None else 0  # A's step from one row to the next
    rb_step = bo.coeff(row) if row is not None else 0  # and B's (channels)
    abase = _without(ao_block, (*lay.k.vars, lay.vec))
    bbase = _without(bo_block, lay.k.vars)
    planes = None
    if unpad and lay.chan is not None:  # each plane's rows: A's offsets into the tile
        hp, wp = w.g.nodes[ab].shape[-2:]
        planes = _planes(lay, hp, wp)
        assert planes is not None, "unpad_legal"
    ak = k_offsets(w, lay.k, planes.rebased(ao, wp) if planes else ao, "ak")
    bk = k_offsets(w, lay.k, bo, "bk")
    work = outer.size * R * V * K
    blk = (rb if R > 1 else row) if row is not None else None  # the row blocks' loop
    G = 1
    if unpad and blk is not None and planes is None:
        G = _groups(lay, VW, w.g.nodes[ab].shape[-1], blk.size, outer.size)
    # stride 2 from a tile: its even and odd elements split once (`_split_tile`), each
    # tap then one plain load where `LUM_VLOADEVEN` was two loads and a permute
    split = compact
    assert not split or (unpad and planes is None and sa == 2 and ra % 2 == 0), "compact_legal"
    half = 0  # `_split_tile`
    # A's steps in what the loads read: from one row to the next and along the row
    la_row, la_sa = (ra // 2, 1) if split else (ra, sa)
    if G > 1:  # an item takes G row blocks, building the rows they share once
        assert blk is not None
        grp = Var(f"{blk.name}g", blk.size // G)
        outer = Axis(tuple(grp if v == blk else v for v in outer.vars))
    items = outer.size
    if items > 1 and w._parallel(work):
        w.pool = (str(items), "0")
        out.append("    for (int64_t t = lum_lo; t < lum_hi; t++) {")
    else:
        out.append(f"    for (int64_t t = 0; t < {items}; t++) {{")
    i2 = "        "
    out.extend(f"{i2}const int64_t {v.name} = {e};" for v, e in outer.unflatten("t"))
    if planes is not None:
        _plane_rows(w, out, i2, abase.c(), planes)
    elif unpad:
        wp = w.g.nodes[ab].shape[-1]
        first = abase.substitute({blk: Lin.of(grp) * G}) if G > 1 else abase
        span = _span(lay, VW, G)
        _padded_rows(w, out, i2, first.c(), span, _tile_rows(span, wp))
        if split:
            half = _split_tile(out, i2, vm, _tile_rows(span, wp) * wp, wp, VW)
    if G > 1:
        out.append(f"{i2}for (int64_t gi = 0; gi < {G}; gi++) {{")
        i2 += "    "
        out.append(f"{i2}const int64_t {blk.name} = {grp.name} * {G} + gi;")
        if split:
            out.append(f"{i2}const int64_t fb = x0 + gi * {R * ra};")
        else:
            out.append(f"{i2}const float *ab = tile + x0 + gi * {R * ra};")
    elif split:
        out.append(f"{i2}const int64_t fb = x0;")
    elif unpad:
        out.append(f"{i2}const float *ab = tile + x0;")
    else:
        out.append(f"{i2}const float *ab = {w._pointer(ab)} + ({abase.c()});")
    out.append(f"{i2}const float *bb = {pb} + ({bbase.c()});")
    out.append(f"{i2}for (int64_t j0 = 0; j0 < {V}; j0 += {JB}) {{")
    i3 = i2 + "    "
    acc = [[f"c{r}_{v}" for v in range(NV)] for r in range(R)]
    out.append(f"{i3}const int64_t jn = {V} - j0 < {JB} ? {V} - j0 : {JB};")
    out.append(f"{i3}{vt} " + ", ".join(f"{c} = {vm}ZERO()" for a in acc for c in a) + ";")
    for full in (True, False):
        out.append(i3 + (f"if (jn == {JB}) {{" if full else "} else {"))
        if not full:
            out.extend(
                f"{i3}    const int64_t n{v} = jn > {v * VW + VW} ? {VW} : "
                f"jn > {v * VW} ? jn - {v * VW} : 0;"
                for v in range(NV)
            )
        out.append(f"{i3}    for (int64_t k = 0; k < {K}; k++) {{")
        if split:  # flat tile index f: its parity's half, at f / 2
            out.append(f"{i3}        const int64_t f = fb + {ak};")
            out.append(f"{i3}        const float *ar = dt + (f & 1) * {half} + (f >> 1) + j0;")
        else:
            out.append(f"{i3}        const float *ar = ab + {ak} + j0 * {sa};")
        if lay.chan is None:  # one weight, R x NV loads
            out.append(f"{i3}        const {vt} s = {vm}BCAST(bb[{bk}]);")
            for r in range(R):
                for v in range(NV):
                    at = _load(vm, f"ar + {r * la_row + v * VW * la_sa}", la_sa, VW, full, v)
                    out.append(f"{i3}        {acc[r][v]} = {vm}FMA(s, {at}, {acc[r][v]});")
        else:  # NV loads, R weights
            out.append(f"{i3}        const float *br = bb + {bk};")
            for v in range(NV):
                out.append(
                    f"{i3}        const {vt} av{v} = {_load(vm, f'ar + {v * VW * la_sa}', la_sa, VW, full, v)};"
                )
            for r in range(R):
                fmas = " ".join(f"{acc[r][v]} = {vm}FMA(s, av{v}, {acc[r][v]});" for v in range(NV))
                out.append(f"{i3}        {{ const {vt} s = {vm}BCAST(br[{r * rb_step}]); {fmas} }}")
        out.append(f"{i3}    }}")
    out.append(i3 + "}")
    out.append(f"{i3}float acc[{R * JB}] __attribute__((aligned(64)));")
    out.append(
        i3
        + " ".join(
            f"{vm}STORE(acc + {r * JB + v * VW}, {acc[r][v]});" for r in range(R) for v in range(NV)
        )
    )
    _store(w, out, i3, lay, row, R, JB, V)
    out.append(f"{i2}}}")
    if G > 1:
        out.append("        }")
    out.append("    }")
    del out_block


def _split_tile(out: list[str], ind: str, vm: str, tile_floats: int, wp: int, vw: int) -> int:
    """`dt`: the tile's built rows (`nrows` of `wp`, `_padded_rows`), even elements first
    and odd ones from `half` on, so that flat index f sits at (f & 1) * half + f / 2 and a
    stride-2 run from f is a unit-stride run there; `vw` floats of slack past the odd half
    for a full load of its last vector.  Returns `half`."""
    half = (tile_floats + 1) // 2
    out += [
        f"{ind}float dt[{2 * half + vw}] __attribute__((aligned(64)));",
        f"{ind}const int64_t nt = nrows * {wp};",
        f"{ind}int64_t i = 0;",  # the odd load reads one past its last lane: < nt
        f"{ind}for (; i + {vw} <= (nt - 1) / 2; i += {vw}) {{",
        f"{ind}    {vm}STORE(dt + i, {vm}LOADEVEN(tile + 2 * i));",
        f"{ind}    {vm}STORE(dt + {half} + i, {vm}LOADEVEN(tile + 2 * i + 1));",
        f"{ind}}}",
        f"{ind}for (; 2 * i < nt; i++) {{",
        f"{ind}    dt[i] = tile[2 * i];",
        f"{ind}    if (2 * i + 1 < nt) dt[{half} + i] = tile[2 * i + 1];",
        f"{ind}}}",
    ]
    return half


def _load(vm: str, at: str, sa: int, vw: int, full: bool, v: int) -> str:
    """Vector `v` of A's row from `at` at stride `sa`: whole, or its first `n{v}` lanes."""
    if sa == 1:
        return f"{vm}LOAD({at})" if full else f"{vm}LOADN({at}, n{v})"
    if sa == 2 and full:
        return f"{vm}LOADEVEN({at})"
    if sa == 2:  # a tail block: masked loads of the elements it spans
        return f"{vm}LOADEVENN({at}, n{v})"
    return f"{vm}GATHERN({at}, {sa}, {vw if full else f'n{v}'})"


def _store(
    w: _KernelWriter,
    out: list[str],
    ind: str,
    lay: StencilLayout,
    row: Var | None,
    R: int,
    JB: int,
    V: int,
) -> None:
    """The R x JB accumulator tile (`acc`, jn valid columns) to the output through the
    epilogue, in loops along the row that GCC vectorizes at full width (each is
    `omp simd`: with a constant trip count GCC otherwise unrolled the loop completely and
    stored it scalar, 3x slower on a 144-channel 56x56 3x3 convolution with ReLU6).

    - A full block: a loop over its JB columns, storing directly.
    - Rows shorter than one block (every block is the last, `jn` == V < JB): the epilogue
      over all JB lanes into a second tile, reading other tensors at the last valid column
      for the lanes past it (never past the row; their results are dropped), then the V
      valid ones copied.  Bounded by `jn`, the epilogue ran at 4 lanes: efficientnet's
      1152-channel 7x7 5x5 depthwise convolution with SiLU 160 -> 90 us.
    - The remainder of a longer row: a loop over its `jn` columns (computing the dropped
      lanes too cost more than it saved there: 144 channels at 56x56 with ReLU6, 99 us
      against 128)."""
    p = w.k.contraction
    assert p is not None
    i4, i5, i6 = ind + "    ", ind + "        ", ind + "            "

    def rows(bound: str, column: str, store: str | None, dest: str | None) -> None:
        """for each of the R rows, for j < bound: the column `column`'s element"""
        out.append(f"{i4}for (int64_t i = 0; i < {R}; i++) {{")
        if row is not None and R > 1:
            out.append(f"{i5}const int64_t {row.name} = {row.name}b * {R} + i;")
        out.append(f"{i5}#pragma omp simd")
        out.append(f"{i5}for (int64_t j = 0; j < {bound}; j++) {{")
        out.append(f"{i6}const int64_t {lay.vec.name} = j0 + {column};")
        if store is None:
            w._store(out, len(i6) // 4, p.loops.out, f"acc[i * {JB} + j]", "float", dest)
        else:
            out.append(f"{i6}{store}")
        out.append(f"{i5}}}")
        out.append(f"{i4}}}")

    if V >= JB:
        out.append(f"{ind}if (jn == {JB}) {{")
        rows(str(JB), "j", None, None)
        out.append(f"{ind}}} else {{")
        rows("jn", "j", None, None)
    else:
        out.append(f"{ind}{{")
        out.append(f"{i4}float etile[{R * JB}] __attribute__((aligned(64)));")
        rows(str(JB), "(j < jn ? j : jn - 1)", None, f"etile[i * {JB} + j]")
        rows("jn", "j", f"out[{p.loops.out.c()}] = etile[i * {JB} + j];", None)
    out.append(f"{ind}}}")


def _row_block(lay: StencilLayout, bo: Lin, nv: int) -> tuple[Var | None, int]:
    """An outer loop the broadcast operand does not move along (a convolution's output
    rows), and how many of its rows one item computes: the largest divisor of its size
    that keeps at most `ACCUMULATORS` vector accumulators.  One row of a 14-wide output
    is one accumulator, a chain of dependent FMAs; four rows are four chains sharing
    every broadcast weight."""
    rows = [v for v in lay.outer.vars if bo.coeff(v) == 0 and lay.a[1].coeff(v) != 0]
    if not rows:
        return None, 1
    row = rows[-1]
    most = max(1, ACCUMULATORS // nv)
    return row, max(d for d in range(1, min(most, row.size) + 1) if row.size % d == 0)


def _without(offset: Lin, drop: tuple[Var, ...]) -> Lin:
    return Lin(tuple((a, c) for a, c in offset.terms if a not in drop), offset.const)
