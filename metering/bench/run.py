"""One benchmark from start to finish: prepare both arms, check parity, measure each
scenario, audit, and collect the raw data a report is made of.

    prepare     pin and set threads (before anything is loaded), compile if asked, load the
                artifact (hashes verified), open the baseline on the original model
    execute     parity on every input set; per scenario the interleaved measurement and the
                TEST01 check of its sampled outputs; TEST04 on the compiled model
    raw         everything measured, nothing derived: `results.derive` computes the rest

Scenarios: `latency` runs the artifact's own batch, one call at a time; `throughput` runs
the largest batch that fits (or `--batch`), which needs a model whose inputs share one
symbolic leading dimension: the model is compiled again at that batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import luminal
from luminal.compiler.artifact import file_sha256, read_artifact
from luminal.compiler.ir import TensorSpec
from luminal.errors import UsageError
from luminal.licensing.terms import BillingTerms
from luminal.metering.bench import environment, inputs
from luminal.metering.bench.audit import test01, test04
from luminal.metering.bench.method import Arm, Clock, Feeds, MethodSettings, Progress, measure
from luminal.metering.bench.outputs import (
    DEFAULT_TOLERANCES,
    OutputCheck,
    check_outputs,
    for_precision,
    merge,
)
from luminal.metering.bench.results import BASELINE, CANDIDATE
from luminal.references.baselines import (
    BaselineOptions,
    check_model,
    open_baseline,
    read_options_file,
    versions,
)
from luminal.references.parity import Tolerance
from luminal.references.quant_steps import steps_of_file
from luminal.references.spread import open_spread

SCENARIOS = ("latency", "throughput")
FRESH_BYTES = 256 * 2**20  # at most this much memory of fresh TEST04 inputs


@dataclass(frozen=True)
class BenchRequest:
    target: Path  # a .lmnl artifact, or a model file with compile_first
    baseline: str = "onnxruntime"
    model: Path | None = None  # the baseline's model; default: the artifact's source
    compile_first: bool = False
    work_dir: Path | None = None  # where compiled artifacts are written
    scenarios: tuple[str, ...] = SCENARIOS
    batch: int | None = None  # throughput batch; None: the largest that fits
    max_batch: int = 64
    inputs: Path | None = None
    seed: int = 0
    input_sets: int = 8
    threads: int | None = None
    cpus: tuple[int, ...] | None = None
    method: MethodSettings = field(default_factory=MethodSettings)
    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    baseline_settings: Mapping[str, str] = field(default_factory=dict)
    baseline_options: Path | None = None  # the baseline's own options file (JSON)
    dims: Mapping[str, int] = field(default_factory=dict)
    terms: BillingTerms | None = None  # from the license (`licensing.terms`)
    trust_unsigned: bool = False  # load an unsigned or untrusted artifact (`--trust-unsigned`)


@dataclass(frozen=True)
class Scenario:
    name: str
    batch: int
    baseline: Arm
    candidate: Arm
    inputs: inputs.InputSets


@dataclass(frozen=True)
class Skipped:
    name: str
    reason: str


@dataclass(frozen=True)
class BenchRun:
    predicate: dict[str, Any]  # raw data only
    subjects: list[dict[str, Any]]
    artifacts: list[Path]


def run_bench(
    req: BenchRequest,
    *,
    clock: Clock = time.perf_counter_ns,
    progress: Progress | None = None,
) -> BenchRun:
    for s in req.scenarios:
        if s not in SCENARIOS:
            raise UsageError(f"unknown scenario '{s}'; choose from {', '.join(SCENARIOS)}")
    conditions = environment.apply(req.threads, req.cpus)
    load_start = environment.load_average()
    artifact, model = _artifact_and_model(req, progress)
    session = luminal.load(artifact, trust_unsigned=req.trust_unsigned, meter=None)
    options_file = read_options_file(req.baseline_options) if req.baseline_options else None
    config = options_file.config if options_file else {}
    baseline, runner = open_baseline(
        req.baseline, model, BaselineOptions(conditions.threads, req.baseline_settings, config)
    )
    sets = (
        inputs.from_file(req.inputs, session.inputs)
        if req.inputs
        else inputs.seeded(session.inputs, req.seed, req.input_sets)
    )
    scenarios: list[Scenario | Skipped] = [
        Scenario("latency", _batch(session.inputs), runner, session.run, sets)
    ]
    artifacts = [artifact]
    if "throughput" in req.scenarios:
        tp, extra = _throughput(req, session, model, runner, sets, progress)
        scenarios.append(tp)
        artifacts.extend(extra)
    if "latency" not in req.scenarios:
        scenarios[0] = Skipped("latency", "not asked for (--scenario)")
    fresh = inputs.fresh(session.inputs, _fresh_count(req.method.audit_runs, sets.sets[0]))
    # a reduced-precision artifact is held to its precision's bound (outputs.for_precision)
    tolerances = for_precision(req.tolerances, session.manifest.options.get("precision"))
    steps = steps_of_file(model)  # one quantization step for outputs computed through it
    # a quantized model's reference moves between ORT's own runs (references.spread)
    spread = open_spread(model)
    data = execute(
        scenarios,
        fresh,
        req.method,
        tolerances,
        clock=clock,
        progress=progress,
        steps=steps,
        spread=spread,
    )
    data.update(where_measured(conditions, load_start))
    manifest = session.manifest
    data["software"] = {
        **versions(),
        "compiler_version": manifest.compiler_version,
        "toolchain": manifest.target.get("toolchain"),
        "flags": manifest.target.get("flags"),
    }
    data["baseline"] = {
        "name": baseline.name,
        "model": str(model),
        "model_sha256": file_sha256(model),
        "settings": dict(req.baseline_settings),
        "info": dict(runner.info),
    }
    if options_file:
        data["baseline"]["options_file"] = options_file.to_json()
    data["candidate"] = {
        "name": "luminal",
        "artifacts": [str(a) for a in artifacts],
        "artifact_digests": [
            {"path": str(a), "sha256": file_sha256(a), "scenario": s}
            for a, s in zip(artifacts, ("latency", "throughput"), strict=False)
        ],
        "manifest": {
            "compiler_version": manifest.compiler_version,
            "target": dict(manifest.target),
            "inputs": [{"name": t.name, "shape": list(t.shape)} for t in manifest.inputs],
        },
        "source": {"path": manifest.source.path, "format": manifest.source.format},
        "compiled_here": req.compile_first,
    }
    data["inputs"] = sets.describe()
    data["request"] = reproduction(req)
    data["license"] = req.terms.license.to_json() if req.terms else None
    data["pricing"] = req.terms.pricing_json() if req.terms else None
    subjects = artifact_subjects(data["candidate"]["artifact_digests"])
    subjects.append(
        {
            "name": f"baseline-model:{model.name}",
            "digest": {"sha256": data["baseline"]["model_sha256"]},
        }
    )
    if options_file:
        subjects.append(
            {
                "name": f"baseline-options:{options_file.path.name}",
                "digest": {"sha256": options_file.sha256},
            }
        )
    subjects.append({"name": "inputs", "digest": {"sha256": sets.digest}})
    if req.inputs:
        subjects.append(_subject(f"inputs-file:{req.inputs.name}", req.inputs))
    return BenchRun(data, subjects, artifacts)


def where_measured(conditions: environment.Conditions, load_start: object) -> dict[str, Any]:
    """The predicate's `conditions` and `machine` (load average at start and now)."""
    return {
        "conditions": conditions.to_json(),
        "machine": {
            **environment.machine(),
            "load_average": {"start": load_start, "end": environment.load_average()},
        },
    }


def artifact_subjects(digests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One report subject per measured artifact (what usage is registered against)."""
    return [
        {"name": f"artifact:{Path(a['path']).name}", "digest": {"sha256": a["sha256"]}}
        for a in digests
    ]


def execute(
    scenarios: Sequence[Scenario | Skipped],
    fresh: Sequence[Feeds],
    method: MethodSettings,
    tolerances: Mapping[str, Tolerance],
    *,
    clock: Clock = time.perf_counter_ns,
    progress: Progress | None = None,
    steps: Mapping[str, float] | None = None,
    spread: Callable[[Feeds], Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """Parity, measurement and audits on prepared arms (tests pass fake arms and clocks);
    `steps`: one quantization step per output computed through quantization; `spread`:
    the reference's own spread on an input set, for a quantized model."""
    parity: list[list[OutputCheck]] = []
    references: dict[str, list[dict[str, np.ndarray]]] = {}
    ran = [s for s in scenarios if isinstance(s, Scenario)]
    for sc in ran:
        references[sc.name] = []
        for k, feeds in enumerate(sc.inputs.sets):
            want = sc.baseline(feeds)
            references[sc.name].append(dict(want))
            spreads = spread(feeds) if spread else None
            parity.append(check_outputs(sc.candidate(feeds), want, tolerances, steps, spreads))
            if progress:
                progress(
                    f"parity ({sc.name})", (k + 1) / len(sc.inputs.sets), f"{k + 1} input sets"
                )
    raw_scenarios: dict[str, Any] = {}
    samples: list[dict[str, object]] = []
    for sc in scenarios:
        if isinstance(sc, Skipped):
            raw_scenarios[sc.name] = {"skipped": sc.reason}
            continue
        m = measure(
            {BASELINE: sc.baseline, CANDIDATE: sc.candidate},
            sc.inputs.sets,
            method,
            sample_arm=CANDIDATE,
            pair=(BASELINE, CANDIDATE),
            clock=clock,
            progress=(lambda phase, f, d, n=sc.name: progress(f"{phase} ({n})", f, d))
            if progress
            else None,
        )
        raw_scenarios[sc.name] = {"batch": sc.batch, "measurement": m.raw_json()}
        for check in test01(m.samples, references[sc.name], tolerances):
            samples.append({"scenario": sc.name, **check.to_json()})
    t04: dict[str, Any] = {"runs": 0, "repeated_ns": [], "fresh_ns": []}
    if ran and fresh:
        sc = ran[0]
        if progress:
            progress("audit TEST04", 0.0, "")
        block = max(1, len(fresh) // 20)  # 20 pairs of blocks for TEST04's interval
        timings = test04(sc.candidate, sc.inputs.sets[0], fresh, block, clock=clock)
        t04 = {"scenario": sc.name, "runs": len(fresh), **timings.to_json()}
        if progress:
            progress("audit TEST04", 1.0, f"{len(fresh)} runs on fresh inputs, as many repeated")
    return {
        "method": {
            **method.to_json(),
            "tolerances": {
                k: [t.rtol, t.atol, *([t.scale] if t.scale else [])] for k, t in tolerances.items()
            },
        },
        "scenarios": raw_scenarios,
        "parity": {
            "sets": sum(len(s.inputs.sets) for s in ran),
            "outputs": [c.to_json() for c in merge(parity)],
        },
        "audit": {"test01": {"samples": samples}, "test04": t04},
    }


def _artifact_and_model(
    req: BenchRequest,
    progress: Progress | None,
) -> tuple[Path, Path]:
    target = req.target
    if not target.exists():
        raise UsageError(f"{target}: no such file")
    if target.suffix.lower() == ".lmnl":
        if req.compile_first:
            raise UsageError(f"{target} is already compiled; --compile-first takes a model file")
        if req.model is not None:
            return target, req.model
        manifest = read_artifact(target, trust_unsigned=req.trust_unsigned).manifest
        source = Path(manifest.source.path)
        if not source.is_file():
            raise UsageError(
                f"{target}: the model it was compiled from ({source}) is not there; pass --model"
            )
        return target, source
    if not req.compile_first:
        raise UsageError(
            f"{target} is a model file: pass a compiled .lmnl artifact, or --compile-first"
        )
    check_model(req.baseline, req.model or target)  # before spending a compile
    work = req.work_dir or Path(".")
    artifact = work / f"{target.stem}.lmnl"
    _compile(target, artifact, req.dims, progress)
    return artifact, req.model or target


def _compile(
    model: Path,
    out: Path,
    dims: Mapping[str, int],
    progress: Progress | None,
) -> None:
    from luminal.compiler.frontend import load_model
    from luminal.compiler.pipeline import CompileOptions, compile_model

    if progress:
        progress(f"compile {out.name}", 0.0, "")
    out.parent.mkdir(parents=True, exist_ok=True)
    # As `luminal compile --budget 0`: the rewrites, and the kernels the tuning database
    # has measured on this machine; measuring itself is `luminal compile`'s job.
    compile_model(load_model(model, dims), out, CompileOptions(budget_seconds=0.0))
    if progress:
        progress(f"compile {out.name}", 1.0, "")


def _batch(specs: Sequence[TensorSpec]) -> int:
    """Items per call: the leading dimension of the first input (1 for a scalar)."""
    return int(specs[0].shape[0]) if specs and specs[0].shape else 1


def _throughput(
    req: BenchRequest,
    session: luminal.Session,
    model: Path,
    runner: Arm,
    sets: inputs.InputSets,
    progress: Progress | None,
) -> tuple[Scenario | Skipped, list[Path]]:
    base = _batch(session.inputs)
    dim = _symbolic_batch(model)
    if dim is None:
        why = f"the model's batch is fixed at {base}: the latency scenario's throughput applies"
        return Skipped("throughput", why), []
    batch = req.batch or _largest_batch(session, base, req.max_batch)
    if batch == base:
        return Skipped("throughput", f"the throughput batch is the latency batch ({base})"), []
    out = (req.work_dir or Path(".")) / f"{model.stem}.b{batch}.lmnl"
    _compile(model, out, {**req.dims, dim: batch}, progress)
    big = luminal.load(out, meter=None)
    sets_b = inputs.rebatch(sets, big.inputs)
    return Scenario("throughput", batch, runner, big.run, sets_b), [out]


def _symbolic_batch(model: Path) -> str | None:
    """The dim_param every ONNX graph input has as its leading dimension, if any."""
    if model.suffix.lower() != ".onnx":
        return None
    import onnx

    proto = onnx.load(str(model), load_external_data=False)
    inits = {t.name for t in proto.graph.initializer}
    names = set()
    for i in proto.graph.input:
        if i.name in inits:
            continue
        dims = i.type.tensor_type.shape.dim
        names.add(dims[0].dim_param if dims else "")
    return names.pop() if len(names) == 1 and "" not in names else None


def _largest_batch(session: luminal.Session, base: int, max_batch: int) -> int:
    """The largest base x 2^k <= max_batch whose memory (arena, inputs, outputs, growing
    linearly with the batch) fits in half the available memory."""
    per_call = session.manifest.memory.arena_bytes
    for s in (*session.inputs, *session.outputs):
        per_call += int(np.prod(s.shape, dtype=np.int64)) * s.dtype.np.itemsize
    budget = _available_memory() // 2
    batch = base
    while batch * 2 <= max_batch and per_call * (batch * 2) // base <= budget:
        batch *= 2
    return batch


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 2**32


def _fresh_count(runs: int, example: Mapping[str, np.ndarray]) -> int:
    size = max(1, sum(a.nbytes for a in example.values()))
    return max(0, min(runs, FRESH_BYTES // size))


def reproduction(req: BenchRequest) -> dict[str, Any]:
    """What the customer asked for, so a vendor can re-run the same bench (`audit`): with
    the report's method settings, tolerances and these, `run_bench` measures the same."""
    return {
        "baseline": req.baseline,
        "baseline_settings": dict(req.baseline_settings),
        "scenarios": list(req.scenarios),
        "batch": req.batch,
        "max_batch": req.max_batch,
        "seed": req.seed,
        "input_sets": req.input_sets,
        "threads": req.threads,
        "cpus": list(req.cpus) if req.cpus else None,
        "dims": dict(req.dims),
        "compile_first": req.compile_first,
    }


def _subject(name: str, path: Path) -> dict[str, Any]:
    return {"name": name, "digest": {"sha256": file_sha256(path)}}
