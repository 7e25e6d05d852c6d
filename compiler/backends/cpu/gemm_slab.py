"""A convolution's input built per band inside the generated GEMM (`Variant.unpad`,
`Variant.compact`).

A convolution reads its input through a PAD whose buffer an elementwise kernel writes
just before it (`schedule/unpad.py`).  At batch 8 those pads were 1.7% of ResNet-18's
kernel time (2 threads: 2.6 of 149 ms, 240-320 us for each 64-channel 58x58 one), a copy
of every activation, written to memory the convolution then read again.  ONNX Runtime
runs no such kernel.

With `unpad`, the generated GEMM reads the pad's *source*: its rows (the output
positions) are cut into bands of whole output rows of one image, and each work item
builds its band's padded input, every input channel's rows at the pad's full width, in a
thread-local slab:

    for each work item (batch index, band of output rows, NR-wide column tile)
        slab: the band's padded rows of every plane it reads, built from the source
              (fill on the borders) when the item's band differs from the last one's
        for each MR-row tile of the band: the micro-kernel reads the slab through the
              convolution's own (cin, kh, kw) offsets, re-based from the pad's planes
              of Hp rows to the slab's of SR rows

Items run column tile innermost and each thread claims one run of them, so a band's slab
is built once per thread for all its column tiles.  Row tiles are balanced over the
band's positions (as `gemm.py` balances them over the whole product); a band's last tile
may be short, its missing rows repeating the band's last position (computed, not
stored).

Whether it is faster is measured: the search times the other candidates with the pad's
kernel in the timed region (`bench.timed_with_pad`), and a winning `unpad` variant drops
the pad's kernel (`schedule.unpad`).

`compact` uses the same bands for a 1x1 convolution with a stride (ResNet's downsampling),
which has no pad: its X reads every second position of every second row, half of each
cache line and one channel plane apart per k.  The slab packs the band's sampled
positions of every channel densely, one output row per slab row, and the product reads
them at unit stride (ResNet-50's 256 -> 512 one at batch 8: 15.2 -> 10.5 ms in the model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from luminal.compiler.backends.cpu.gemm_layout import Axis, GemmLayout
from luminal.compiler.backends.cpu.padrows import padded_row
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.symbolic import Lin, Var

if TYPE_CHECKING:
    from luminal.compiler.backends.cpu.codegen import _KernelWriter

#: Most bytes of one slab.  A 64-channel 56x56 layer's band of 14 output rows is 16 padded
#: rows of 58 (238 KB): with the weight panel it stays in a 1 MiB L2.
MAX_SLAB = 256 << 10

#: Work items to aim for (bands x column tiles x batch), as `gemm.MIN_ITEMS`.
MIN_ITEMS = 16

#: Fewest output positions per band.  Each work item copies its K x NR weight panel once
#: (`gemm.py`) for the band's row tiles: on ResNet's 7x7 maps at batch 8 one image per
#: band meant 8 copies of each 590 KB panel where the pad's kernel way had one, and
#: 512 -> 512 ran 8.7 -> 9.0-9.7 ms (2 threads).
MIN_BAND_ROWS = 96


@dataclass(frozen=True)
class Slab:
    """How one contraction builds and reads its band's input: padded rows of the pad's
    source (`unpad`), or a strided 1x1 convolution's sampled positions packed densely
    (`compact`)."""

    compact: bool  # sampled positions packed (else padded rows at full width)
    source: int  # the buffer the slab is built from: the pad's source, or X itself
    oh: Var  # the output-row variable (the rows' second-to-last)
    ow: Var  # the output-column variable (the rows' last)
    row_step: int  # offset per output row in the (padded) input (stride x W)
    col_step: int  # offset per output column in the (padded) input (the stride)
    planes: int  # planes (channels) a row reads, from its base plane on
    plane_terms: Lin  # the batch and outer row variables' base plane
    band: int  # output rows per band
    rows: int  # slab rows per plane: padded rows (band - 1) x stride + extent, or band
    height: int  # the (padded) input's rows per plane
    width: int  # the (padded) input's row width
    table: tuple[int, ...]  # each k's offset into the slab

    @property
    def row_width(self) -> int:
        """Floats per slab row: the padded row, or one output row's positions."""
        return self.ow.size if self.compact else self.width

    @property
    def floats(self) -> int:
        return self.planes * self.rows * self.row_width

    @property
    def bands(self) -> int:
        return -(-self.oh.size // self.band)

    def position(self, oh: str, oh0: str, ow: str) -> str:
        """C offset into the slab of the window at output position (oh, ow)."""
        if self.compact:
            return f"({oh} - {oh0}) * {self.ow.size} + {ow}"
        return f"({oh} - {oh0}) * {self.row_step} + {ow} * {self.col_step}"


def plan(
    sched: Schedule, kernel: Kernel, nt: int, batch: int, compact: bool = False
) -> Slab | None:
    """The slab geometry when `kernel` (as oriented) may build its X per band: X is a pad
    it may skip (`Kernel.fold`, read as a convolution's window over the pad), or with
    `compact` X is read by a 1x1 window with a stride (module docstring); None otherwise.
    `nt` column tiles and `batch` products size the bands so that there are
    `MIN_ITEMS` items."""
    f, p = kernel.fold, kernel.contraction
    if p is None or (f is None and not compact):
        return None
    lay = GemmLayout.of(p)
    xb, xoff = lay.x
    if compact:
        if f is not None and xb == f.pad:
            return None  # padded: `unpad`
        source = xb
    elif f is None or xb != f.pad:
        return None
    else:
        source = f.source
    if xb < 0 or xoff.const != 0 or len(lay.rows.vars) < 2:
        return None
    g = sched.graph
    hp, wp = g.nodes[xb].shape[-2:]
    hw = hp * wp
    *outer, oh, ow = lay.rows.vars
    row_step, col_step = xoff.coeff(oh), xoff.coeff(ow)
    if not (0 < row_step < hw and row_step % wp == 0 and 0 < col_step < wp):
        return None
    # the batch and outer row variables select planes only
    plane_vars = (*lay.batch.vars, *outer)
    if any(xoff.coeff(v) % hw for v in plane_vars):
        return None
    known = {*plane_vars, oh, ow, *lay.k.vars}
    if any(a not in known for a, _ in xoff.terms):  # a gather, or another variable
        return None
    offsets = lay.k.offsets(xoff)
    if min(offsets, default=0) < 0:
        return None
    within = [t % hw for t in offsets]
    extent = max(t // wp for t in within) + 1  # input rows a position's window spans
    last_col = max(t % wp for t in within) + col_step * (ow.size - 1)
    if last_col >= wp or (oh.size - 1) * (row_step // wp) + extent > hp:
        return None
    planes = max(t // hw for t in offsets) + 1
    step = row_step // wp
    if compact and (any(within) or (step == 1 and col_step == 1)):
        return None  # a window wider than one position, or nothing strided to pack

    def rows_of(band: int) -> int:
        return band if compact else (band - 1) * step + extent

    def size(band: int) -> int:
        return planes * rows_of(band) * (ow.size if compact else wp) * 4

    band = _band(oh.size, ow.size, size, nt * batch * Axis(tuple(outer)).size)
    if band is None:
        return None
    rows = rows_of(band)
    width = ow.size if compact else wp
    table = tuple((t // hw) * rows * width + t % hw for t in offsets)
    plane_terms = Lin(tuple((v, xoff.coeff(v) // hw) for v in plane_vars if xoff.coeff(v)), 0)
    return Slab(
        compact,
        source,
        oh,
        ow,
        row_step,
        col_step,
        planes,
        plane_terms,
        band,
        rows,
        hp,
        wp,
        table,
    )


def _band(height: int, width: int, size: Callable[[int], int], others: int) -> int | None:
    """Output rows per band: the most whose slab fits `MAX_SLAB` while the items number
    `MIN_ITEMS` (a divisor of the height where one is at least half of that, so that
    bands are even), at least `MIN_BAND_ROWS` positions (fewer items where that takes
    it); None where a band that wide does not fit or is more than the map."""
    least = -(-MIN_BAND_ROWS // width)
    fits = [b for b in range(least, height + 1) if size(b) <= MAX_SLAB]
    if not fits:
        return None
    enough = [b for b in fits if others * -(-height // b) >= MIN_ITEMS] or fits[:1]
    best = max(enough)
    divisors = [b for b in enough if height % b == 0 and 2 * b >= best]
    return max(divisors) if divisors else best


def fill(w: _KernelWriter, slab: Slab, out: list[str], ind: str, plane: str, oh0: str) -> None:
    """C that builds `slab` (the buffer `slab`) for the band starting at output row
    `oh0`, planes [`plane`, `plane` + planes): the pad's rows from its source, fill on
    the borders, or the strided positions packed."""
    if slab.compact:
        src = w._pointer(slab.source)
        h, wd = slab.height, slab.width
        out += [
            f"{ind}for (int64_t pl = 0; pl < {slab.planes}; pl++) {{",
            f"{ind}    const float *sp = {src} + ({plane} + pl) * {h * wd};",
            f"{ind}    for (int64_t q = 0; q < {slab.rows} && {oh0} + q < {slab.oh.size}; q++) {{",
            f"{ind}        float *srow = slab + (pl * {slab.rows} + q) * {slab.ow.size};",
            f"{ind}        const float *row = sp + ({oh0} + q) * {slab.row_step};",
            f"{ind}        for (int64_t j = 0; j < {slab.ow.size}; j++) srow[j] = row[j * {slab.col_step}];",
            f"{ind}    }}",
            f"{ind}}}",
        ]
        return
    f = w.k.fold
    assert f is not None
    top = f.widths(w.g)[0][0]
    step = slab.row_step // slab.width
    out += [
        f"{ind}for (int64_t pl = 0; pl < {slab.planes}; pl++) {{",
        f"{ind}    for (int64_t q = 0; q < {slab.rows}; q++) {{",
        f"{ind}        float *srow = slab + (pl * {slab.rows} + q) * {slab.width};",
        f"{ind}        const int64_t y = {oh0} * {step} + q - {top};",
        *padded_row(w, ind + "        ", "srow", f"{plane} + pl", "y"),
        f"{ind}    }}",
        f"{ind}}}",
    ]


__all__ = ["MAX_SLAB", "Slab", "fill", "plan"]
