"""The pipeline's whole-model check: what a backend built, run through the backend's own
loader, against the reference interpreter on the model as loaded.

Every target gets it.  It needs the device (or, for the Triton backends, Triton's
interpreter with TRITON_INTERPRET=1): a backend that cannot run its build here says so
with `ArtifactIncompatible` from `load`, and the check is SKIPPED with that reason rather
than failing the compile.  Inputs are `random_inputs(seed=1)`; each output must agree
within the kernel-check tolerance (`references.parity`), or, for a reduced-precision
build, within its precision's bound (`references.parity.precision_tolerance`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from luminal.compiler.artifact.manifest import Manifest
from luminal.compiler.backends.protocol import Backend
from luminal.compiler.inputs import random_inputs
from luminal.compiler.ir import Graph
from luminal.compiler.ir import interpreter as reference
from luminal.errors import ArtifactIncompatible, CompilerError, LuminalError, one_line
from luminal.references.parity import Check, agrees, precision_tolerance


class CheckStatus(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # the unsearched compile disagrees too: written, and said
    FELL_BACK = "fell back"  # the searched compile disagreed: the unsearched one was written
    SKIPPED = "skipped"  # the build cannot run here (no device)


@dataclass(frozen=True)
class CheckResult:
    status: CheckStatus
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"status": self.status.value, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.status.value}: {self.detail}" if self.detail else self.status.value


def check_build(
    backend: Backend,
    graph: Graph,
    manifest: Manifest,
    members: Mapping[str, bytes],
    precision: str = "fp32",
) -> CheckResult:
    try:
        exe = backend.load(manifest, members)
    except ArtifactIncompatible as err:
        return CheckResult(CheckStatus.SKIPPED, f"cannot run it here: {err}")
    except LuminalError:
        raise
    except Exception as err:
        raise CompilerError(f"target '{backend.name}': loading failed: {one_line(err)}") from None
    feeds = random_inputs(graph.input_specs(), seed=1)
    want = reference.run(graph, feeds)
    try:
        got = exe.run(feeds)
    except LuminalError as err:
        return CheckResult(CheckStatus.FAILED, f"the run failed: {err}")
    except Exception as err:
        raise CompilerError(f"target '{backend.name}': running failed: {one_line(err)}") from None
    worst, tolerance = 0.0, precision_tolerance(precision)
    for name, value in want.items():
        if name not in got:
            return CheckResult(CheckStatus.FAILED, f"output '{name}' is missing")
        ok, err_ = agrees(got[name], value, Check.KERNEL, tolerance)
        if not ok:
            return CheckResult(
                CheckStatus.FAILED, f"output '{name}' differs from the reference by {err_:.3g}"
            )
        worst = max(worst, err_)
    return CheckResult(CheckStatus.PASSED, f"max abs error {worst:.2g}")
