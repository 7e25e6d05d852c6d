"""Library alternatives: a contraction may run as a well-kept library GEMM (OpenBLAS's
`sgemm`) with the kernel's fused epilogue applied after it.  Whether that beats the
generated code depends on the shape and the machine, so it is measured, never assumed.
"""

from __future__ import annotations

from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.variant import Variant

FAMILY = "library"


def alternatives(sched: Schedule, kernel: Kernel, features: tuple[str, ...]) -> tuple[Variant, ...]:
    from luminal.compiler.backends.cpu.variants import candidates

    return tuple(v for v in candidates(sched, kernel, features) if v.impl != "generated")
