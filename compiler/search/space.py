"""The per-kernel search space: the default variant first, then every alternative the
layout and library rule families offer, without duplicates."""

from __future__ import annotations

from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import DEFAULT, Variant
from luminal.compiler.search.rules import layout, library

FAMILIES = (layout, library)


def alternatives(sched: Schedule, kernel: Kernel, features: tuple[str, ...]) -> tuple[Variant, ...]:
    found: dict[Variant, None] = {DEFAULT: None}
    for family in FAMILIES:
        for v in family.alternatives(sched, kernel, features):
            found.setdefault(v, None)
    return tuple(found)
