"""Static memory plan: one arena, offsets from buffer lifetimes, in-place reuse.

Each intermediate buffer lives from the kernel that writes it to the last kernel that
reads it.  Buffers are placed largest first at the lowest offset that overlaps no buffer
alive at the same time (first fit).  A kernel may write over one of its inputs when it
reads that input only at the element it is writing and the input dies there.
"""

from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


@dataclass(frozen=True)
class Lifetime:
    buffer: int  # IR node id
    nbytes: int
    start: int  # index of the writing kernel
    end: int  # index of the last reading kernel (>= start)
    reuse: int | None = None  # write in place over this buffer


def plan(lifetimes: list[Lifetime]) -> tuple[dict[int, int], int]:
    """buffer -> arena offset, and the arena's size in bytes."""
    # In-place chains share one slot that lives from the first write to the last read.
    root: dict[int, int] = {}
    for lt in sorted(lifetimes, key=lambda lt: lt.start):
        root[lt.buffer] = root.get(lt.reuse, lt.reuse) if lt.reuse is not None else lt.buffer
    slots: dict[int, list[int]] = {}
    for lt in lifetimes:
        r = root[lt.buffer]
        span = slots.setdefault(r, [lt.start, lt.end, lt.nbytes])
        span[0], span[1], span[2] = (
            min(span[0], lt.start),
            max(span[1], lt.end),
            max(span[2], lt.nbytes),
        )
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, start, end)
    offsets: dict[int, int] = {}
    for r, (start, end, size) in sorted(slots.items(), key=lambda kv: (-kv[1][2], kv[1][0])):
        size = align(size)
        offset = 0
        moved = True  # bump past every clash with a live buffer until none is left
        while moved:
            moved = False
            for o, s, a, b in placed:
                if a <= end and start <= b and o < offset + size and offset < o + s:
                    offset = align(o + s)
                    moved = True
        placed.append((offset, size, start, end))
        offsets[r] = offset
    arena = max((o + s for o, s, _, _ in placed), default=0)
    return {lt.buffer: offsets[root[lt.buffer]] for lt in lifetimes}, arena


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN
