"""One padded row built from a pad's source (`Variant.unpad`): the C both unpadding
kernels emit, the depthwise stencil (`stencil.py`) and the generated GEMM
(`gemm_slab.py`).

A pad of the last two axes (`schedule.unpad.PadFold`) maps its row `y` of a plane to the
source's row `y - top`; a row outside the source is all fill, one inside is `left` fills,
the source row, and `right` fills.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from luminal.compiler.backends.cpu.codegen import _KernelWriter


def padded_row(w: _KernelWriter, ind: str, dst: str, plane: str, y: str) -> list[str]:
    """C that fills `dst` (the pad's row width) with the padded row of plane `plane`
    whose source row is `y` (out of range: all fill)."""
    f = w.k.fold
    assert f is not None
    g = w.g
    hp, wp = g.nodes[f.pad].shape[-2:]
    (top, bottom), (left, right) = f.widths(g)
    h, wd = hp - top - bottom, wp - left - right
    fill = f"{f.fill(g)!r}f"
    src = w._pointer(f.source)
    y = f"({y})"
    return [
        f"{ind}if ({y} < 0 || {y} >= {h}) {{",
        f"{ind}    for (int64_t j = 0; j < {wp}; j++) {dst}[j] = {fill};",
        f"{ind}}} else {{",
        f"{ind}    for (int64_t j = 0; j < {left}; j++) {dst}[j] = {fill};",
        f"{ind}    memcpy({dst} + {left}, {src} + ({plane}) * {h * wd} + {y} * {wd}, {wd * 4});",
        f"{ind}    for (int64_t j = {left + wd}; j < {wp}; j++) {dst}[j] = {fill};",
        f"{ind}}}",
    ]


__all__ = ["padded_row"]
