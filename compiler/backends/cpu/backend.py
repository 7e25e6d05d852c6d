"""The CPU backend: this machine's CPU, generated C, one shared library.

    tuner     `CpuTuner`: register tiles, K blocking, OpenBLAS, Winograd, threading,
              ranked by a calibrated roofline and timed in one timing library
    codegen   the schedule as C (`codegen.generate`) with the chosen variants
    build     the C compiled for this machine's CPU features (`toolchain`), linked with
              OpenBLAS when a kernel calls it, and the packed weights
    load      `CpuExecutable`: checks the CPU features, opens the library, runs it
    profiled  the same library with a timer around every kernel (`luminal profile`)

What all of these need to agree on (the CPU's features, the compiler flags, the C
toolchain, the code generator's options) is worked out once per request (`Context`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from luminal.compiler.artifact.manifest import Manifest
from luminal.compiler.backends.cpu import blas, codegen, toolchain
from luminal.compiler.backends.cpu.executable import ABI, CpuExecutable
from luminal.compiler.backends.cpu.native import NativeLibrary
from luminal.compiler.backends.cpu.tuner import CpuTuner
from luminal.compiler.backends.protocol import Built, Capabilities, Request
from luminal.compiler.hardware import CpuInfo, Probe, cpu_device, detect_cpu
from luminal.compiler.hardware.device import Device
from luminal.compiler.ir import DType

MODEL_C = "model.c"


@dataclass(frozen=True)
class Context:
    cpu: CpuInfo
    flags: tuple[str, ...]  # compiler flags for the CPU features used
    features: tuple[str, ...]  # the cpuinfo features the code needs
    toolchain: toolchain.Toolchain
    codegen: codegen.CodegenOptions

    @staticmethod
    def of(request: Request) -> Context:
        cpu = detect_cpu()
        flags, features = toolchain.feature_flags(cpu)
        tc = toolchain.find_toolchain()
        o = request.options
        cg = codegen.options_for(features, o.openmp and tc.openmp, o.tile_m, o.tile_n)
        return Context(cpu, flags, features, tc, replace(cg, variants=dict(request.variants)))


def device_key(cpu: CpuInfo) -> str:
    """The tuning database's device: the CPU's fingerprint and the threads it runs."""
    return f"cpu-{cpu.fingerprint}-t{cpu.logical_cores}"


class CpuBackend:
    name = "cpu"
    kind = "cpu"
    priority = 0

    def discover(self) -> Sequence[Device]:
        return [cpu_device(detect_cpu(Probe.from_env().root))]

    def capabilities(self, device: Device | None) -> Capabilities:
        return Capabilities(
            dtypes=tuple(d.value for d in DType),
            kernel_kinds=("elementwise", "reduce", "contraction", "scatter"),
            needs_device_to_compile=True,  # the library is built for this machine's CPU
        )

    def tuner(self, request: Request) -> CpuTuner:
        c = Context.of(request)
        return CpuTuner(
            device_key(c.cpu), c.codegen, c.toolchain, c.flags, c.features, c.cpu.logical_cores
        )

    def codegen(self, request: Request) -> Mapping[str, str]:
        return {MODEL_C: codegen.generate(request.sched, Context.of(request).codegen)}

    def build(self, request: Request, sources: Mapping[str, str]) -> Built:
        c = Context.of(request)
        source = sources[MODEL_C]
        library = _build_cached(request, source, c)
        target = {
            "kind": self.kind,
            "backend": self.name,
            "abi": ABI,
            "arch": c.cpu.arch,
            "cpu_features": list(c.features),
            "cpu_model": c.cpu.model,
            "toolchain": c.toolchain.describe(),
            "flags": [*toolchain.BASE_FLAGS, *c.flags],
            **blas.record(source),  # the OpenBLAS linked, when a kernel calls it
        }
        members = {
            "model.so": library,
            "weights.bin": request.sched.weights_blob(),
            MODEL_C: source.encode(),
        }
        return Built(target, members)

    def load(self, manifest: Manifest, members: Mapping[str, bytes]) -> CpuExecutable:
        return CpuExecutable(manifest, members)

    def profiled(self, request: Request) -> NativeLibrary:
        """The request's library with `lum_kernel_seconds[]` timers, opened here."""
        c = Context.of(request)
        options = replace(c.codegen, profile=True)
        source = codegen.generate(request.sched, options)
        if blas.MARKER in source:  # the library links OpenBLAS: open it first
            blas.load(blas.describe(), "the profiled model")
        return NativeLibrary.build(request.sched, options, c.flags, c.toolchain)


def _build_cached(request: Request, source: str, c: Context) -> bytes:
    """The built library from the compile cache when this source was built before with
    the same compiler and flags (a warm compile), else built and stored."""
    from luminal.compiler import cache

    store = cache.open_cache(request.options.tuning_db, request.options.use_tuning_db)
    name = cache.key(source, c.toolchain.describe(), *c.toolchain.command, *c.flags)
    if store is not None and (hit := store.get(cache.Kind.BUILD, name)) is not None:
        return hit
    library = toolchain.build_shared_library(source, c.toolchain, c.flags)
    if store is not None:
        store.put(cache.Kind.BUILD, name, library)
    return library
