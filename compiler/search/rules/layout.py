"""Layout and schedule alternatives for one kernel: register tile sizes, K blocking,
and whether the kernel runs on one thread or all of them.

These do not compose with the graph rewrites (a tile size is a property of one kernel's
code, not of the graph), so they are enumerated per kernel rather than saturated; the
legal set comes from the backend, which knows its vector width and register file.
"""

from __future__ import annotations

from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import Variant

FAMILY = "layout"


def alternatives(sched: Schedule, kernel: Kernel, features: tuple[str, ...]) -> tuple[Variant, ...]:
    from luminal.compiler.backends.cpu.variants import candidates

    return tuple(v for v in candidates(sched, kernel, features) if v.impl == "generated")
