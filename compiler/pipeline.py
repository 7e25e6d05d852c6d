"""`compile_model`: the whole compiler, one named step after another.

    verify IR -> schedule -> generate C -> build library -> pack weights -> write artifact

Each step is timed; the result says what was built and how long each step took.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from luminal._version import __version__
from luminal.compiler.artifact import write_artifact
from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.ir import spec
from luminal.compiler.schedule import Schedule, schedule
from luminal.errors import UsageError

TARGETS = ("cpu",)
STEPS = ("verify IR", "schedule", "generate C", "build library", "pack weights", "write artifact")


@dataclass(frozen=True)
class CompileOptions:
    target: str = "cpu"
    tile_m: int | None = None  # contraction register tile; None picks by vector width
    tile_n: int | None = None
    openmp: bool = True

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
) -> CompileResult:
    if options.target not in TARGETS:
        raise UsageError(f"unknown target '{options.target}'; available here: {', '.join(TARGETS)}")
    seconds: dict[str, float] = {}
    clock = _Clock(seconds, on_step)
    graph = model.graph
    with clock("verify IR"):
        spec.check(graph)
    with clock("schedule"):
        sched = schedule(graph)
    cpu = detect_cpu()
    flags, features = toolchain.feature_flags(cpu)
    with clock("generate C"):
        tc = toolchain.find_toolchain()
        mr, nr = default_tiles(features)
        cg = codegen.CodegenOptions(
            mr=options.tile_m or mr,
            nr=options.tile_n or nr,
            fma="fma" in features,
            openmp=options.openmp and tc.openmp,
        )
        source = codegen.generate(sched, cg)
    with clock("build library"):
        library = toolchain.build_shared_library(source, tc, flags)
    with clock("pack weights"):
        weights = pack_weights(sched)
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
                "flags": list(toolchain.BASE_FLAGS)
                + (["-fopenmp"] if cg.openmp else [])
                + list(flags),
            },
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
        write_artifact(
            output,
            manifest,
            {"model.so": library, "weights.bin": weights, "model.c": source.encode()},
        )
    stats = sched.to_json()
    return CompileResult(
        path=output,
        kernels=len(sched.kernels),
        kernel_kinds=dict(stats["kernel_kinds"]),  # type: ignore[call-overload]
        arena_bytes=sched.arena_bytes,
        intermediate_bytes=sched.intermediate_bytes,
        weights_bytes=sched.weights_bytes,
        artifact_bytes=output.stat().st_size,
        toolchain=tc.describe(),
        cpu_features=features,
        seconds=seconds,
    )


def default_tiles(features: tuple[str, ...]) -> tuple[int, int]:
    """Register tile (rows, columns) of f32 accumulators that fits the vector registers:
    8 x 32 is 16 zmm registers with AVX-512, 6 x 16 is 12 ymm with AVX2.  Measured on the
    encoder: 4 x 16 ran at a third of the speed of 8 x 32 on an AVX-512 machine."""
    if "avx512f" in features:
        return 8, 32
    if "avx2" in features or "avx" in features:
        return 6, 16
    return 4, 8


def pack_weights(sched: Schedule) -> bytes:
    blob = bytearray(sched.weights_bytes)
    for node, offset in sched.weights:
        data = np.ascontiguousarray(sched.weight_array(node)).tobytes()
        blob[offset : offset + len(data)] = data
    return bytes(blob)


def _spec(s) -> dict[str, object]:  # type: ignore[no-untyped-def]
    return {"name": s.name, "shape": list(s.shape), "dtype": s.dtype.value}


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
