"""`compile_model`: the whole compiler, one named stage after another, for every target.

    verify IR -> rewrite -> lower precision -> schedule -> tune kernels -> generate code
      -> build -> check -> write artifact

Each stage is a function from a `Job` (the compile so far) to the next `Job`; what differs
per target the backend supplies through its protocol (`backends/protocol.py`: tuner,
codegen, build, load), so this file has no per-target branch.

`rewrite` (e-graph saturation) and `tune kernels` (a measured choice of variant per
kernel, through the tuning database and the backend's `Tuner`) run when a search budget
is given (`CompileOptions.budget_seconds`, `luminal compile --budget`); without one the
compile takes the backend's default variants, which is what tests and integrations want.
`lower precision` (`ir/precision.py`) stores an f32 graph's floats in fp16 or bf16 when
`CompileOptions.precision` asks, after the rewrite (which, and whose cache, sees the
model's own f32 graph) and before everything that lays out memory; it also stores i32
contraction operands that fit 16 bits as int16 (`ir/narrow.py`, exact).
`check` runs what `build` produced, through the backend's own loader, against the
reference interpreter on the model as loaded (in f32: a reduced build is held to its
precision's tolerance, `references.parity.precision_tolerance`); when the searched compile
disagrees, the unsearched one is built and written instead.  Each stage is timed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from luminal._version import __version__
from luminal.compiler.artifact import (
    MANIFEST,
    Manifest,
    Memory,
    Signer,
    SourceModel,
    write_artifact,
)
from luminal.compiler.backends.protocol import Built, Request
from luminal.compiler.backends.target import Target, resolve
from luminal.compiler.check import CheckResult, CheckStatus, check_build
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.ir import Graph, narrow, precision, spec
from luminal.compiler.options import CompileOptions
from luminal.compiler.schedule import Schedule, schedule, settled
from luminal.compiler.schedule.variant import Variant
from luminal.compiler.schedule.work import cost
from luminal.compiler.search.kernels import KernelSearchOptions, KernelSearchReport
from luminal.compiler.search.saturation import SaturationReport
from luminal.errors import CompilerError, LuminalError, UsageError, one_line
from luminal.licensing.gate import LicenseHook, authorize_compile

__all__ = [
    "DEFAULT_BUDGET_SECONDS",
    "STEPS",
    "TARGETS",
    "CompileOptions",
    "CompileResult",
    "compile_model",
]

#: The built-in targets; plugins add their own names (compiler/backends/registry.py).
TARGETS = ("auto", "cpu", "cuda", "rocm")
#: `luminal compile`'s default search budget: a suite model compiles cold in under 3
#: minutes on 2 cores with it (measured figures in docs/search.md).
DEFAULT_BUDGET_SECONDS = 90.0
#: The e-graph's time: this share of the budget, between REWRITE_MIN_SECONDS (so that
#: `--budget 0`, tuning-database hits only, still rewrites the graph those hits were
#: measured on) and REWRITE_MAX_SECONDS.
REWRITE_SHARE = 0.15
REWRITE_MIN_SECONDS = 5.0
REWRITE_MAX_SECONDS = 15.0

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Job:
    """The compile so far: what each stage reads and what it adds."""

    model: LoadedModel
    output: Path
    options: CompileOptions
    target: Target
    deadline: float  # time.monotonic() by which the search's kernels are built (the budget)
    progress: Progress | None
    graph: Graph
    sched: Schedule | None = None
    rewrite: SaturationReport | None = None
    search: KernelSearchReport | None = None
    variants: Mapping[str, Variant] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    built: Built | None = None
    manifest: Manifest | None = None
    check: CheckResult | None = None

    @property
    def request(self) -> Request:
        assert self.sched is not None
        return Request(self.sched, self.options, self.target.device, self.variants)

    @property
    def searched(self) -> bool:
        """Whether the search changed anything: a rewritten graph or a chosen variant."""
        return self.rewrite is not None or bool(self.variants)


def verify(job: Job) -> Job:
    spec.check(job.graph)
    return job


def rewrite(job: Job) -> Job:
    if not (job.options.searching and job.options.rewrite):
        return job
    graph, report = rewritten(job.graph, job.options)
    return dataclasses.replace(job, graph=graph, rewrite=report)


def rewritten(graph: Graph, options: CompileOptions) -> tuple[Graph, SaturationReport]:
    """The e-graph stage's result for `graph` under the limits `options` give it, from the
    install's rewrite cache when it holds it.  Whoever rebuilds a compile's schedule
    (`luminal profile` on an artifact) goes through here too: saturation stops on a wall
    clock budget, so a rewrite under other limits, or not taken from the cache, can stop at
    another round and give other kernels."""
    from luminal.compiler import cache
    from luminal.compiler.search.saturate import rewrite as saturate
    from luminal.compiler.search.saturation import SaturationBudget

    budget = max(options.budget_seconds or 0.0, 0.0)
    seconds = min(REWRITE_MAX_SECONDS, max(REWRITE_MIN_SECONDS, REWRITE_SHARE * budget))
    limits = dataclasses.replace(SaturationBudget(), seconds=seconds)
    store = cache.open_cache(options.tuning_db, options.use_tuning_db)
    name = cache.graph_key(graph, "rewrite", repr(limits))
    hit = cache.load_graph(got) if store and (got := store.get(cache.Kind.REWRITE, name)) else None
    if hit is not None and hit[0].input_specs() == graph.input_specs():
        cached, note = hit
        return cached, dataclasses.replace(SaturationReport.from_json(note), cached=True)
    out, report = saturate(graph, limits)
    if store is not None and report.fallback is None:
        data = cache.dump_graph(out, report.to_json())
        if data is not None:
            store.put(cache.Kind.REWRITE, name, data)
    return out, report


def lower_precision(job: Job) -> Job:
    graph = precision.lower(job.graph, job.options.precision)
    return dataclasses.replace(job, graph=narrow.narrow_operands(graph))


def schedule_graph(job: Job) -> Job:
    """The schedule; a searching compile's carries each contraction's other orientations
    (and the weights they read) for `tune` to measure and settle."""
    return dataclasses.replace(job, sched=schedule(job.graph, alternatives=job.options.searching))


def settle(job: Job) -> Job:
    """Each contraction in the orientation its chosen variant names (`schedule.orient`),
    alternatives dropped and weights laid out for what the kernels read; each pad a
    variant reads through dropped (`schedule.unpad`), and the arena planned for it."""
    assert job.sched is not None
    sched, variants = settled(job.sched, job.variants)
    return dataclasses.replace(job, sched=sched, variants=variants)


def tune(job: Job) -> Job:
    if not job.options.searching:
        return settle(job)
    backend = job.target.backend
    tuner = _call(backend.name, "tuning", lambda: backend.tuner(job.request))
    if tuner is None:  # nothing to tune on this target (or no device to time it on)
        return settle(job)
    from luminal.compiler.search.kernels import search_kernels
    from luminal.compiler.search.tunedb import TuningDB

    o = job.options
    search = KernelSearchOptions(
        deadline=job.deadline,
        top_k=o.top_k,
        in_context=o.model_runs,
        use_cache=o.use_tuning_db,
        measure=(o.budget_seconds or 0) > 0,
    )
    try:
        db: TuningDB | None = TuningDB(Path(o.tuning_db) if o.tuning_db else None)
    except UsageError:
        if o.tuning_db:
            raise  # a path the user named: their mistake, say so
        db = None  # the default database cannot be opened (read-only home): search without
    try:
        assert job.sched is not None
        report = search_kernels(job.sched, tuner, db, search, job.progress)
    finally:
        if db is not None:
            db.close()
    return settle(dataclasses.replace(job, search=report, variants=dict(report.variants)))


def generate(job: Job) -> Job:
    backend = job.target.backend
    sources = _call(backend.name, "code generation", lambda: backend.codegen(job.request))
    return dataclasses.replace(job, sources=dict(sources))


def build(job: Job) -> Job:
    backend = job.target.backend
    built = _call(backend.name, "building", lambda: backend.build(job.request, job.sources))
    _check_built(backend.name, backend.kind, built)
    return dataclasses.replace(job, built=built, manifest=_manifest(job, built))


def check(job: Job) -> Job:
    """The built model against the reference on the model as loaded.  A searched compile
    that disagrees although each piece passed its own check is replaced by the
    unsearched compile rather than written wrong."""
    assert job.manifest is not None and job.built is not None
    backend, graph, built_as = job.target.backend, job.model.graph, job.options.precision
    result = check_build(backend, graph, job.manifest, job.built.members, built_as)
    if result.status is not CheckStatus.FAILED or not job.searched:
        return dataclasses.replace(job, check=result)
    plain = dataclasses.replace(job, graph=graph, rewrite=None, variants={})
    for stage in (lower_precision, schedule_graph, settle, generate, build):
        plain = stage(plain)
    assert plain.manifest is not None and plain.built is not None
    again = check_build(backend, graph, plain.manifest, plain.built.members, built_as)
    fell_back = CheckResult(CheckStatus.FELL_BACK, f"{result.detail}; unsearched: {again.detail}")
    # The report keeps what the search found (and the rewrite's statistics): it is
    # what was measured, even though the artifact does not use it.
    return dataclasses.replace(plain, rewrite=job.rewrite, check=fell_back)


def write(job: Job) -> Job:
    assert job.manifest is not None and job.built is not None
    # Signed by this install's key: a runtime maps only code its trusted keys vouch for.
    write_artifact(job.output, job.manifest, job.built.members, signer=Signer.for_install())
    return job


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Job], Job]


STAGES = (
    Stage("verify IR", verify),
    Stage("rewrite", rewrite),
    Stage("lower precision", lower_precision),
    Stage("schedule", schedule_graph),
    Stage("tune kernels", tune),
    Stage("generate code", generate),
    Stage("build", build),
    Stage("check", check),
    Stage("write artifact", write),
)
STEPS = tuple(s.name for s in STAGES)


@dataclass(frozen=True)
class CompileResult:
    path: Path
    kernels: int
    kernel_kinds: dict[str, int]
    arena_bytes: int
    intermediate_bytes: int
    weights_bytes: int
    artifact_bytes: int
    toolchain: str
    cpu_features: tuple[str, ...]
    seconds: dict[str, float] = field(default_factory=dict)
    rewrite: SaturationReport | None = None  # the e-graph's report, when it ran
    search: KernelSearchReport | None = None  # the kernel search's report, when it ran
    check: CheckResult | None = None
    flops: float = 0.0  # per run, counted from the schedule (`schedule.work.cost`)
    bytes_moved: float = 0.0  # per run: what every kernel reads and writes
    target: str = "cpu"  # the backend that compiled it
    device: str | None = None  # the device it was built for, when one was here
    notes: Mapping[str, Any] = field(default_factory=dict)  # the backend's
    precision: str = "fp32"  # what was built (`auto` resolved): ir/precision.py
    # What was built, for a caller that builds it again another way (`luminal profile`
    # adds kernel timers); not part of the JSON report.
    schedule: Schedule | None = field(default=None, compare=False, repr=False)
    variants: Mapping[str, Variant] = field(default_factory=dict, compare=False, repr=False)

    @property
    def interrupted(self) -> bool:
        """Ctrl-C during the search: the best-so-far artifact was written."""
        return self.search is not None and self.search.interrupted

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    @staticmethod
    def of(job: Job, seconds: dict[str, float]) -> CompileResult:
        sched, built = job.sched, job.built
        assert sched is not None and built is not None
        costs = [cost(sched, k) for k in sched.kernels]
        stats = sched.to_json()
        device = job.target.device
        return CompileResult(
            path=job.output,
            kernels=len(sched.kernels),
            kernel_kinds=dict(stats["kernel_kinds"]),  # type: ignore[call-overload]
            arena_bytes=sched.arena_bytes,
            intermediate_bytes=sched.intermediate_bytes,
            weights_bytes=sched.weights_bytes,
            artifact_bytes=job.output.stat().st_size,
            toolchain=str(built.target.get("toolchain") or f"{job.target.name} backend"),
            cpu_features=tuple(built.target.get("cpu_features", ())),
            seconds=seconds,
            rewrite=job.rewrite,
            search=job.search,
            check=job.check,
            flops=float(sum(c.flops for c in costs)),
            bytes_moved=float(sum(c.bytes for c in costs)),
            target=job.target.name,
            device=device.name if device is not None else None,
            notes=dict(built.notes),
            precision=precision.Precision(job.options.precision).value,
            schedule=sched,
            variants=dict(job.variants),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "target": self.target,
            "device": self.device,
            "precision": self.precision,
            "kernels": self.kernels,
            "kernel_kinds": self.kernel_kinds,
            "arena_bytes": self.arena_bytes,
            "intermediate_bytes": self.intermediate_bytes,
            "weights_bytes": self.weights_bytes,
            "artifact_bytes": self.artifact_bytes,
            "toolchain": self.toolchain,
            "cpu_features": list(self.cpu_features),
            "seconds": self.seconds,
            "total_seconds": self.total_seconds,
            "rewrite": None if self.rewrite is None else self.rewrite.to_json(),
            "search": None if self.search is None else self.search.to_json(),
            "interrupted": self.interrupted,
            "check": None if self.check is None else self.check.to_json(),
            "flops": self.flops,
            "bytes_moved": self.bytes_moved,
            "notes": dict(self.notes),
        }


def compile_model(
    model: LoadedModel,
    output: Path,
    options: CompileOptions | None = None,
    on_step: Callable[[str], None] | None = None,
    on_progress: Progress | None = None,
    target: Target | None = None,
    on_license: LicenseHook | None = None,
) -> CompileResult:
    """Compile for `options.target` ("auto", "cpu", "cuda", "rocm" or a plugin's name;
    compiler/backends/target.py), or for `target` when the caller resolved it already.

    The one license gate: every way of compiling (CLI, `InferenceSession`, `torch.compile`,
    this call) needs `compile` entitled on the resolved target, checked before any stage
    runs (a LicenseError, exit 3, if not).  `on_license` hears the status (its warnings,
    e.g. near expiry); without it they go to the `luminal.licensing` logger
    (`licensing/gate.py`)."""
    started = time.monotonic()
    options = options or CompileOptions()
    target = target or resolve(options.target)  # UsageError: unknown target, or device absent
    authorize_compile(target.license_target, on_license)  # before any stage runs
    # What is built is recorded: `auto` resolves here (ir/precision.py).
    built_as = precision.Precision(options.precision).resolved()
    options = dataclasses.replace(options, target=target.name, precision=built_as)
    budget = max(options.budget_seconds or 0.0, 0.0)
    job = Job(model, output, options, target, started + budget, on_progress, model.graph)
    seconds: dict[str, float] = {}
    for stage in STAGES:
        if on_step:
            on_step(stage.name)
        start = time.perf_counter()
        job = stage.run(job)
        seconds[stage.name] = time.perf_counter() - start
    return CompileResult.of(job, seconds)


def _manifest(job: Job, built: Built) -> Manifest:
    sched = job.sched
    assert sched is not None
    device = job.target.device
    return Manifest(
        compiler_version=__version__,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        target={**built.target, "device": device.to_json() if device is not None else None},
        source=SourceModel(job.model.source, job.model.format),
        inputs=tuple(sched.graph.input_specs()),
        outputs=tuple(sched.graph.output_specs()),
        memory=Memory(sched.arena_bytes, sched.intermediate_bytes, sched.weights_bytes),
        options=job.options.to_json(),
        schedule=sched.to_json(),
        variants=dict(job.variants),
        notes=dict(built.notes),
    )


def _call(name: str, what: str, fn: Callable[[], Any]) -> Any:
    """A backend's stage; a foreign exception from it (a plugin's bug) is one line."""
    try:
        return fn()
    except (LuminalError, KeyboardInterrupt):
        raise
    except Exception as err:
        raise CompilerError(f"target '{name}': {what} failed: {one_line(err)}") from None


def _check_built(name: str, kind: str, built: Built) -> None:
    """The backend's target record is how the runtime finds the backend again."""
    data = built.target
    if data.get("backend") != name or data.get("kind") != kind:
        raise CompilerError(
            f"target '{name}': its backend recorded target {{kind: {data.get('kind')!r}, "
            f"backend: {data.get('backend')!r}}}; it must be {{kind: {kind!r}, backend: {name!r}}}"
        )
    bad = [m for m in built.members if m == MANIFEST or not m or "/" in m or m.startswith(".")]
    if bad:
        raise CompilerError(f"target '{name}': its backend produced bad member names {bad}")
