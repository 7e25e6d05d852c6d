"""Compiling for a backend other than the CPU: the pipeline's steps with the backend's
`compile` in the middle, written into the same artifact format.

    verify IR -> rewrite -> schedule -> generate code (backend.compile) -> write artifact

`rewrite` (the e-graph, backend-neutral) runs when a search budget is given, as on the
CPU; kernel variants are not measured here (that needs the device).

The manifest is the CPU one's (sources, inputs, outputs, memory plan, schedule) with the
backend's own target record, which names the backend so `luminal.load` can find it again,
and the device it was built for, when one was here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from luminal._version import __version__
from luminal.compiler.artifact import MANIFEST, write_artifact
from luminal.compiler.backends.target import Target
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.ir import spec
from luminal.compiler.schedule import Schedule, schedule
from luminal.errors import CompilerError, LuminalError, one_line

if TYPE_CHECKING:
    from luminal.compiler.pipeline import CompileOptions, CompileResult

STEPS = ("verify IR", "rewrite", "schedule", "generate code", "write artifact")


def compile_for_backend(
    model: LoadedModel,
    output: Path,
    options: CompileOptions,
    target: Target,
    on_step: Callable[[str], None] | None = None,
) -> CompileResult:
    from luminal.compiler.pipeline import CompileResult, _Clock, _rewrite

    backend = target.backend
    seconds: dict[str, float] = {}
    clock = _Clock(seconds, on_step)
    graph = model.graph
    with clock("verify IR"):
        spec.check(graph)
    rewrite_report = None
    with clock("rewrite"):
        if options.budget_seconds is not None and options.rewrite:
            graph, rewrite_report = _rewrite(graph, options.budget_seconds)
    with clock("schedule"):
        sched = schedule(graph)
    with clock("generate code"):
        try:
            built = backend.compile(sched, options, target.device)
        except LuminalError:
            raise
        except Exception as err:
            raise CompilerError(
                f"target '{backend.name}': code generation failed: {one_line(err)}"
            ) from None
        record = _target_record(backend.name, backend.kind, built.target, built.members)
    with clock("write artifact"):
        manifest = {
            "compiler_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "target": {
                **record,
                "device": target.device.to_json() if target.device else None,
            },
            **model_record(model, sched, options),
            "notes": dict(built.notes),
        }
        write_artifact(output, manifest, dict(built.members))
    return CompileResult.of(
        sched,
        output,
        seconds,
        rewrite_report,
        toolchain=str(record.get("toolchain") or f"{backend.name} backend"),
        cpu_features=(),
        target=backend.name,
        device=target.device.name if target.device else None,
    )


def _target_record(name: str, kind: str, record: Any, members: Any) -> dict[str, Any]:
    """The backend's target record, checked: it is how the runtime finds the backend."""
    data = dict(record)
    if data.get("backend") != name or data.get("kind") != kind:
        raise CompilerError(
            f"target '{name}': its backend recorded target {{kind: {data.get('kind')!r}, "
            f"backend: {data.get('backend')!r}}}; it must be {{kind: {kind!r}, backend: {name!r}}}"
        )
    bad = [m for m in members if m == MANIFEST or not m or "/" in m or m.startswith(".")]
    if bad:
        raise CompilerError(f"target '{name}': its backend produced bad member names {bad}")
    return data


def model_record(model: LoadedModel, sched: Schedule, options: CompileOptions) -> dict[str, Any]:
    """The manifest fields every target shares: the options, the source model, the
    compiled graph's inputs and outputs, the memory plan and the schedule's figures."""
    graph = sched.graph
    return {
        "options": asdict(options),
        "source": {"path": model.source, "format": model.format},
        "inputs": [_spec(s) for s in graph.input_specs()],
        "outputs": [_spec(s) for s in graph.output_specs()],
        "memory": {
            "arena_bytes": sched.arena_bytes,
            "intermediate_bytes": sched.intermediate_bytes,
            "weights_bytes": sched.weights_bytes,
        },
        "schedule": sched.to_json(),
    }


def _spec(s: Any) -> dict[str, object]:
    return {"name": s.name, "shape": list(s.shape), "dtype": s.dtype.value}
