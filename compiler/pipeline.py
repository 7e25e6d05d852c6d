"""`compile_model`: the whole compiler, one named step after another.

    verify IR -> rewrite -> schedule -> pack weights -> search kernels
      -> generate C -> build library -> check -> write artifact

`rewrite` (e-graph saturation) and `search kernels` (measured choice of a variant per
kernel, through the tuning database) run when a search budget is given
(`CompileOptions.budget_seconds`, `luminal compile --budget`); without one the compile
takes the backend's default variants, which is what tests and integrations want.
Each step is timed; the result says what was built and how long each step took.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from luminal._version import __version__
from luminal.compiler.artifact import write_artifact
from luminal.compiler.backends.build import compile_for_backend, model_record
from luminal.compiler.backends.cpu import blas, codegen, toolchain
from luminal.compiler.backends.target import Target, resolve
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.hardware import CpuInfo, detect_cpu
from luminal.compiler.ir import Graph, spec
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.schedule import Schedule, schedule
from luminal.compiler.search import costmodel
from luminal.errors import UsageError

if TYPE_CHECKING:
    from luminal.compiler.search.kernels import KernelSearchReport

#: The built-in targets; plugins add their own names (compiler/backends/registry.py).
TARGETS = ("auto", "cpu", "cuda", "rocm")
STEPS = (
    "verify IR",
    "rewrite",
    "schedule",
    "pack weights",
    "search kernels",
    "generate C",
    "build library",
    "check",
    "write artifact",
)
#: `luminal compile`'s default search budget: a suite model compiles cold in under 3
#: minutes on 2 cores with it (measured figures in docs/search.md).
DEFAULT_BUDGET_SECONDS = 90.0
#: The e-graph's time: this share of the budget, between REWRITE_MIN_SECONDS (so that
#: `--budget 0`, tuning-database hits only, still rewrites the graph those hits were
#: measured on) and REWRITE_MAX_SECONDS.
REWRITE_SHARE = 0.15
REWRITE_MIN_SECONDS = 5.0
REWRITE_MAX_SECONDS = 15.0


@dataclass(frozen=True)
class CompileOptions:
    target: str = "cpu"
    tile_m: int | None = None  # contraction register tile; None picks by vector width
    tile_n: int | None = None
    openmp: bool = True
    # Search: None = no search (default variants, no tuning database); 0 = rewrite and take
    # tuning-database hits, measure nothing; > 0 = rewrite and measure for up to this long.
    budget_seconds: float | None = None
    top_k: int = 4  # candidates per kernel that get timed
    tuning_db: str | None = None  # path; None: $LUMINAL_TUNING_DB or $LUMINAL_HOME/tuning.db
    use_tuning_db: bool = True  # False: measure even what the database knows
    rewrite: bool = True  # e-graph rewrites when searching

    def cache_key(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True) + __version__
        return hashlib.sha256(text.encode()).hexdigest()[:16]


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
    rewrite: dict[str, object] | None = None  # the e-graph's SaturationReport
    search: dict[str, object] | None = None  # the KernelSearchReport
    interrupted: bool = False  # Ctrl-C during the search: best-so-far artifact written
    check: str | None = None  # the searched model against the reference: "passed" or why not
    flops: float = 0.0  # per run, counted from the schedule (search.costmodel.work)
    bytes_moved: float = 0.0  # per run: what every kernel reads and writes
    target: str = "cpu"  # the backend that compiled it
    device: str | None = None  # the device it was built for, when not this CPU

    @classmethod
    def of(
        cls,
        sched: Schedule,
        output: Path,
        seconds: dict[str, float],
        rewrite_report: Any,
        **fields: Any,
    ) -> CompileResult:
        """A result for any target: what the schedule and the written artifact say, plus
        the target's own `fields` (toolchain, features, search, ...)."""
        stats = sched.to_json()
        return cls(
            path=output,
            kernels=len(sched.kernels),
            kernel_kinds=dict(stats["kernel_kinds"]),  # type: ignore[call-overload]
            arena_bytes=sched.arena_bytes,
            intermediate_bytes=sched.intermediate_bytes,
            weights_bytes=sched.weights_bytes,
            artifact_bytes=output.stat().st_size,
            seconds=seconds,
            rewrite=None if rewrite_report is None else rewrite_report.to_json(),
            **fields,
        )

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["cpu_features"] = list(self.cpu_features)
        data["total_seconds"] = self.total_seconds
        return data


def compile_model(
    model: LoadedModel,
    output: Path,
    options: CompileOptions = CompileOptions(),
    on_step: Callable[[str], None] | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
    target: Target | None = None,
) -> CompileResult:
    """Compile for `options.target` ("auto", "cpu", "cuda", "rocm" or a plugin's name;
    compiler/backends/target.py), or for `target` when the caller resolved it already.
    Targets other than the CPU go through their backend (compiler/backends/build.py)."""
    target = target or resolve(options.target)  # UsageError: unknown target, or device absent
    options = dataclasses.replace(options, target=target.name)
    if target.name != "cpu":
        return compile_for_backend(model, output, options, target, on_step)
    started = time.monotonic()
    seconds: dict[str, float] = {}
    clock = _Clock(seconds, on_step)
    graph = model.graph
    searching = options.budget_seconds is not None
    budget = max(options.budget_seconds or 0.0, 0.0)
    with clock("verify IR"):
        spec.check(graph)
    rewrite_report = None
    with clock("rewrite"):
        if searching and options.rewrite:
            graph, rewrite_report = _rewrite(graph, budget)
    with clock("schedule"):
        sched = schedule(graph)
    cpu = detect_cpu()
    flags, features = toolchain.feature_flags(cpu)
    tc = toolchain.find_toolchain()
    cg = codegen.options_for(features, options.openmp and tc.openmp, options.tile_m, options.tile_n)
    with clock("pack weights"):
        weights = sched.weights_blob()
    search_report = None
    with clock("search kernels"):
        if searching:
            search_report = _search(
                sched, cg, tc, flags, features, weights, cpu, options, started + budget, on_progress
            )
            cg = dataclasses.replace(cg, variants=dict(search_report.variants))
    with clock("generate C"):
        source = codegen.generate(sched, cg)
    with clock("build library"):
        library = toolchain.build_shared_library(source, tc, flags)
    check = None
    with clock("check"):
        if searching and (rewrite_report is not None or cg.variants):
            check = "passed"
            if not _agrees(model.graph, sched, library, weights):
                # What the search chose (a rewrite, a kernel variant) disagrees with the
                # reference on the whole model although each piece passed its own check:
                # ship the unsearched compile rather than a wrong artifact.
                check = "failed: wrote the unsearched compile instead"
                graph = model.graph
                sched = schedule(graph)
                weights = sched.weights_blob()
                cg = dataclasses.replace(cg, variants={})
                source = codegen.generate(sched, cg)
                library = toolchain.build_shared_library(source, tc, flags)
    with clock("write artifact"):
        manifest = {
            "compiler_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "abi": 1,
            "target": {
                "kind": "cpu",
                "arch": cpu.arch,
                "cpu_features": list(features),
                "cpu_model": cpu.model,
                "toolchain": tc.describe(),
                "flags": list(toolchain.BASE_FLAGS) + list(flags),
                **blas.record(source),  # the OpenBLAS linked, when a kernel calls it
            },
            **model_record(model, sched, options),
            "variants": {name: v.to_json() for name, v in cg.variants.items()},
        }
        write_artifact(
            output,
            manifest,
            {"model.so": library, "weights.bin": weights, "model.c": source.encode()},
        )
    work = [costmodel.work(sched, k) for k in sched.kernels]
    return CompileResult.of(
        sched,
        output,
        seconds,
        rewrite_report,
        toolchain=tc.describe(),
        cpu_features=features,
        search=None if search_report is None else search_report.to_json(),
        interrupted=search_report is not None and search_report.interrupted,
        check=check,
        flops=sum(w.flops for w in work),
        bytes_moved=sum(w.bytes for w in work),
    )


def _rewrite(graph: Graph, budget: float) -> tuple[Graph, Any]:
    from luminal.compiler.search.saturate import SaturationBudget, rewrite

    seconds = min(REWRITE_MAX_SECONDS, max(REWRITE_MIN_SECONDS, REWRITE_SHARE * budget))
    return rewrite(graph, dataclasses.replace(SaturationBudget(), seconds=seconds))


def _search(
    sched: Schedule,
    cg: codegen.CodegenOptions,
    tc: toolchain.Toolchain,
    flags: tuple[str, ...],
    features: tuple[str, ...],
    weights: bytes,
    cpu: CpuInfo,
    options: CompileOptions,
    deadline: float,
    on_progress: Callable[[str, int, int], None] | None,
) -> KernelSearchReport:
    from luminal.compiler.search.kernels import KernelSearchOptions, search_kernels
    from luminal.compiler.search.tunedb import TuningDB

    device = device_fingerprint(cpu)
    search = KernelSearchOptions(
        deadline=deadline,
        top_k=options.top_k,
        use_cache=options.use_tuning_db,
        measure=(options.budget_seconds or 0) > 0,
    )
    try:
        db: TuningDB | None = TuningDB(Path(options.tuning_db) if options.tuning_db else None)
    except UsageError:
        if options.tuning_db:
            raise  # a path the user named: their mistake, say so
        db = None  # the default database cannot be opened (read-only home): search without
    try:
        return search_kernels(
            sched,
            cg,
            tc,
            flags,
            features,
            weights,
            device,
            cpu.logical_cores,
            db,
            search,
            on_progress,
        )
    finally:
        if db is not None:
            db.close()


def device_fingerprint(cpu: CpuInfo) -> str:
    """The tuning database's device key: the CPU's fingerprint and the threads it runs."""
    return f"cpu-{cpu.fingerprint}-t{cpu.logical_cores}"


def _agrees(original: Graph, sched: Schedule, library: bytes, weights: bytes) -> bool:
    """The searched library (rewritten graph, chosen variants) against the reference
    interpreter on the model as loaded, on random inputs."""
    from luminal.compiler.search import measure

    feeds = measure.random_feeds(original, seed=1)
    want = reference.run(original, feeds)
    got = measure.run_model(sched, library, weights, feeds)
    return all(measure.matches(got[name], want[name])[0] for name in want)


class _Clock:
    def __init__(self, seconds: dict[str, float], on_step: Callable[[str], None] | None) -> None:
        self.seconds = seconds
        self.on_step = on_step
        self.step = ""
        self.start = 0.0

    def __call__(self, step: str) -> _Clock:
        self.step = step
        return self

    def __enter__(self) -> None:
        if self.on_step:
            self.on_step(self.step)
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.seconds[self.step] = time.perf_counter() - self.start
