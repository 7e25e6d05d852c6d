"""Where a compiled model spends its time, kernel by kernel: what `luminal profile` shows.

    compiled (schedule + variants)  -> the backend's `profiled` build: one timer per kernel
                                    -> timed runs for `seconds`: per-kernel time and share
    the artifact, without timers    -> timed runs: the end-to-end time; minus the kernels'
                                       sum, the time spent outside kernels ("unaccounted")
    work.cost, device_machine       -> each kernel's FLOPs and bytes, GFLOP/s, GB/s and %
                                       of the roofline at its arithmetic intensity

Each row names the ONNX nodes its kernel computes (`schedule.provenance`).  A model is
compiled through `compile_model` (the one pipeline, the license gate); an artifact's
schedule is rebuilt from its source model with the variants it records, and refused in
one line when that rebuild would not be the schedule the artifact holds.  Only a backend
with `profiled` (`backends.protocol.Profiling`: the CPU today) can be profiled.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from luminal.compiler.backends.protocol import Executable, Profiling, Request, TimedModel
from luminal.compiler.backends.target import Target, resolve
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.inputs import random_inputs
from luminal.compiler.options import CompileOptions
from luminal.compiler.schedule import Schedule
from luminal.compiler.schedule.provenance import kernel_origins
from luminal.compiler.schedule.variant import Variant
from luminal.compiler.schedule.work import cost
from luminal.compiler.search.tuner import Machine
from luminal.errors import UsageError

#: The `--json` document's schema (docs/cli.md, "luminal profile"); bumped on a change.
SCHEMA = "luminal-profile/1"
WARMUP_RUNS = 3
MIN_RUNS = 3
#: Seconds of one block of runs when the profiled and the plain builds alternate.
BLOCK_SECONDS = 0.05

Runner = Callable[[Mapping[str, np.ndarray]], object]


@dataclass(frozen=True)
class KernelProfile:
    name: str  # the schedule's kernel name (k0, k1, ...)
    kind: str  # contraction, elementwise, reduce, scatter
    nodes: tuple[str, ...]  # the ONNX nodes it computes, in graph order
    variant: str  # `Variant.label` of the variant it ran
    shape: tuple[int, ...]  # of the value it writes
    seconds: float  # per run
    share: float  # of the kernels' summed time
    flops: int  # per run (`schedule.work.cost`)
    bytes: int  # per run: every buffer read once, the output written once
    roof_gflops: float  # the roofline at its FLOPs per byte

    @property
    def gflops(self) -> float:
        return self.flops / max(self.seconds, 1e-12) / 1e9

    @property
    def gbs(self) -> float:
        return self.bytes / max(self.seconds, 1e-12) / 1e9

    @property
    def percent_of_roof(self) -> float:
        return 100 * self.gflops / self.roof_gflops if self.roof_gflops > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "nodes": list(self.nodes),
            "variant": self.variant,
            "shape": list(self.shape),
            "ms": self.seconds * 1e3,
            "share": self.share,
            "flops": self.flops,
            "bytes": self.bytes,
            "gflops": self.gflops,
            "gbs": self.gbs,
            "roof_gflops": self.roof_gflops,
            "percent_of_roof": self.percent_of_roof,
        }


@dataclass(frozen=True)
class Profile:
    model: str  # what was profiled (model or artifact path)
    target: str
    threads: int | None  # None: the library's default (every CPU it may run on)
    runs: int  # timed runs of the profiled build
    kernels: tuple[KernelProfile, ...]  # in schedule order
    end_to_end_seconds: float  # per run, the artifact without timers
    timed_seconds: float  # per run, the profiled build (timers included)
    machine: Machine

    @property
    def kernel_seconds(self) -> float:
        return sum(k.seconds for k in self.kernels)

    @property
    def unaccounted_seconds(self) -> float:
        """End to end minus the kernels: calls, copies, thread wake-ups, Python; it can be
        slightly negative when the timers' own cost exceeds it."""
        return self.end_to_end_seconds - self.kernel_seconds

    def by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for k in self.kernels:
            out[k.kind] = out.get(k.kind, 0.0) + k.seconds
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def to_json(self) -> dict[str, object]:
        m = self.machine
        return {
            "schema": SCHEMA,
            "model": self.model,
            "target": self.target,
            "threads": self.threads,
            "runs": self.runs,
            "end_to_end_ms": self.end_to_end_seconds * 1e3,
            "timed_ms": self.timed_seconds * 1e3,
            "kernel_ms": self.kernel_seconds * 1e3,
            "unaccounted_ms": self.unaccounted_seconds * 1e3,
            "machine": {
                "peak_gflops_per_core": m.peak_gflops,
                "cores": m.cores,
                "bandwidth_gbs": m.bandwidth_gbs,
            },
            "by_kind_ms": {kind: s * 1e3 for kind, s in self.by_kind().items()},
            "kernels": [k.to_json() for k in self.kernels],
        }


def profile_model(
    model: LoadedModel,
    options: CompileOptions,
    seconds: float = 2.0,
    threads: int | None = None,
    target: Target | None = None,
) -> Profile:
    """Compile `model` (through `compile_model`, into a temporary artifact) and profile
    what was built."""
    from luminal.compiler.pipeline import compile_model

    target = target or resolve(options.target)
    _profiling(target)
    with tempfile.TemporaryDirectory(prefix="luminal-profile-") as tmp:
        out = Path(tmp) / "model.lmnl"
        result = compile_model(model, out, options, target=target)
        assert result.schedule is not None
        from luminal.compiler.runtime.session import load

        built_with = dataclasses.replace(options, target=target.name)  # as compile_model did
        request = Request(result.schedule, built_with, target.device, result.variants)
        return _measure(model.source, load(out), target, request, seconds, threads)


def profile_artifact(
    path: Path, dims: Mapping[str, int], seconds: float = 2.0, threads: int | None = None
) -> Profile:
    """Profile an artifact: its schedule rebuilt from its source model with the variants
    it records.  A UsageError says what to pass instead when that is not possible."""
    from luminal.compiler.artifact import read_artifact
    from luminal.compiler.frontend import load_model
    from luminal.compiler.runtime.session import open_artifact
    from luminal.licensing.gate import authorize_compile

    art = read_artifact(path)
    manifest = art.manifest
    target = resolve(manifest.backend)
    _profiling(target)
    authorize_compile(target.license_target)  # profiling builds code, as compiling does
    source = Path(manifest.source.path)
    instead = "profile the model file instead (luminal profile MODEL --budget as compiled)"
    if manifest.source.format not in ("onnx", "pt2") or not source.is_file():
        raise UsageError(f"{path}: its source model {source} is not here to rebuild; {instead}")
    options = CompileOptions(
        **{
            k: v
            for k, v in manifest.options.items()
            if k in {f.name for f in dataclasses.fields(CompileOptions)}
        }
    )
    if manifest.profile is not None:  # its own code is the opt point's
        dims = {**manifest.profile.specializations[0].point, **dims}
    loaded = load_model(source, dims)
    graph = loaded.graph
    if options.searching and options.rewrite:  # as the compile did, from its cache
        from luminal.compiler.pipeline import rewritten

        graph, _ = rewritten(graph, options)
    from luminal.compiler.schedule import schedule, settled

    sched, _ = settled(schedule(graph), manifest.variants)
    if not _same_schedule(sched, manifest.schedule, manifest.variants):
        raise UsageError(
            f"{path}: rebuilding its schedule from {source} gives other kernels than it "
            f"holds (the rewrite or the source changed); {instead}"
        )
    request = Request(sched, options, target.device, dict(manifest.variants))
    return _measure(str(path), open_artifact(path, art), target, request, seconds, threads)


def _profiling(target: Target) -> None:
    if not isinstance(target.backend, Profiling):
        raise UsageError(f"target '{target.name}' cannot time its kernels; profile on the CPU")


def _same_schedule(
    sched: Schedule, recorded: Mapping[str, object], variants: Mapping[str, Variant]
) -> bool:
    """Whether a rebuilt schedule is the one an artifact's manifest describes."""
    mine = sched.to_json()
    names = {k.name for k in sched.kernels}
    keys = ("kernels", "kernel_kinds", "arena_bytes", "weights_bytes")
    return all(mine.get(k) == recorded.get(k) for k in keys) and set(variants) <= names


def _measure(
    what: str,
    plain: Executable,
    target: Target,
    request: Request,
    seconds: float,
    threads: int | None,
) -> Profile:
    """`plain` is the artifact without timers (its pool starts on its first run, inside
    the thread setting, as the profiled build's does)."""
    sched = request.sched
    feeds = random_inputs(sched.graph.input_specs())
    backend = target.backend
    assert isinstance(backend, Profiling)
    with _threads(threads):
        timed: TimedModel = backend.profiled(request)
        (timed_seconds, runs), (end_to_end, _) = _time_both(
            timed.run, plain.run, feeds, seconds, timed.reset_timers
        )
        per_kernel = [s / runs for s in timed.kernel_seconds()]
    machine = roofline_machine(target, request)
    total = max(sum(per_kernel), 1e-12)
    rows = []
    for kernel, spent in zip(sched.kernels, per_kernel, strict=True):
        c = cost(sched, kernel)
        variant = request.variants.get(kernel.name, Variant())
        rows.append(
            KernelProfile(
                name=kernel.name,
                kind=kernel.kind,
                nodes=kernel_origins(sched, kernel),
                variant=variant.label,
                shape=sched.graph.nodes[kernel.node].shape,
                seconds=spent,
                share=spent / total,
                flops=c.flops,
                bytes=c.bytes,
                roof_gflops=machine.roof_gflops(c.flops, c.bytes, threads),
            )
        )
    return Profile(
        what, target.name, threads, runs, tuple(rows), end_to_end, timed_seconds, machine
    )


def roofline_machine(target: Target, request: Request) -> Machine:
    """The target's roofline calibration (peak GFLOP/s, bandwidth), as its search measured
    and keeps it in the tuning database (`search.kernels.device_machine`)."""
    from luminal.compiler.search.kernels import device_machine
    from luminal.compiler.search.tunedb import TuningDB

    tuner = target.backend.tuner(request)
    if tuner is None:
        raise UsageError(f"target '{target.name}' has no roofline calibration")
    named = request.options.tuning_db
    try:
        db: TuningDB | None = TuningDB(Path(named) if named else None)
    except UsageError:  # the default database cannot be opened: calibrate without it
        db = None
    try:
        return device_machine(db, tuner)
    finally:
        if db is not None:
            db.close()


def _time_both(
    timed: Runner,
    plain: Runner,
    feeds: Mapping[str, np.ndarray],
    seconds: float,
    after_warmup: Callable[[], None],
) -> tuple[tuple[float, int], tuple[float, int]]:
    """(seconds per run, runs) of the profiled build and of the plain one, over about
    `seconds` together (and MIN_RUNS runs each), after a warm-up of each: in alternating
    blocks of about BLOCK_SECONDS, so that a burst of load on the shared machine falls on
    both alike.  Timed one after the other, half the time each, resnet50's kernels summed
    to 52.1 ms per run against 41.2 ms end to end (-10.9 ms "outside kernels").  A block is
    long against the 200 us the other library's workers spin after its last run."""
    for _ in range(WARMUP_RUNS):
        timed(feeds)
        plain(feeds)
    after_warmup()
    spent = [0.0, 0.0]
    runs = [0, 0]
    start = time.perf_counter()
    while min(runs) < MIN_RUNS or time.perf_counter() - start < seconds:
        for side, run in enumerate((timed, plain)):
            block = time.perf_counter()
            while True:
                run(feeds)
                runs[side] += 1
                now = time.perf_counter()
                if now - block >= BLOCK_SECONDS:
                    break
            spent[side] += now - block
    return (spent[0] / runs[0], runs[0]), (spent[1] / runs[1], runs[1])


@contextmanager
def _threads(threads: int | None) -> Iterator[None]:
    """`LUMINAL_NUM_THREADS` for the libraries opened inside (their pools read it when
    they start, on their first parallel kernel)."""
    if threads is None:
        yield
        return
    before = os.environ.get("LUMINAL_NUM_THREADS")
    os.environ["LUMINAL_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LUMINAL_NUM_THREADS", None)
        else:
            os.environ["LUMINAL_NUM_THREADS"] = before


__all__ = [
    "SCHEMA",
    "KernelProfile",
    "Profile",
    "profile_artifact",
    "profile_model",
    "roofline_machine",
]
