"""The GPU backends: NVIDIA (`cuda`) and AMD (`rocm`), one Triton implementation.

tuner    with the device here: `TritonTuner` (tl.dot tiles and the cuBLAS/hipBLAS
         alternative per contraction, each timed as model runs on the GPU); None
         when compiling without the device (nothing to time on)
codegen  schedule -> model.py (Triton kernels + host `run`); needs no GPU and no
         triton install, so any machine can compile for a GPU it does not have
build    model.py and the packed weights; the target records the GPU architecture
         (the device's, or DEFAULT_ARCH when compiling without one) and the
         Triton version the code was written against
load     on a GPU of the artifact's kind: buffers on the device, a warm-up that
         compiles the kernels, then one CUDA/HIP graph replayed per run; with
         TRITON_INTERPRET=1: Triton's interpreter on CPU tensors; otherwise
         ArtifactIncompatible, in one line
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import TYPE_CHECKING, Any

from luminal.compiler.backends.protocol import Built, Capabilities, Request
from luminal.compiler.backends.triton import codegen
from luminal.compiler.backends.triton.launch import TritonOptions
from luminal.compiler.backends.triton.runtime import TritonExecutable, device_for, load_module
from luminal.compiler.hardware.device import Device
from luminal.compiler.ir import DType
from luminal.errors import ArtifactIncompatible

if TYPE_CHECKING:
    from luminal.compiler.artifact.manifest import Manifest
    from luminal.compiler.backends.triton.tuner import Timer, TritonTuner

#: The architecture recorded when compiling without the device: the current data-center
#: part of each vendor (H100/H200, MI300X).  Triton compiles for the GPU present at load.
DEFAULT_ARCH = {"cuda": "sm_90", "rocm": "gfx942"}
KERNEL_KINDS = ("elementwise", "reduce", "contraction", "scatter")
ABI = 1  # the generated module's interface: run(arena, weights, inputs, outputs, err, launch)


@dataclass(frozen=True)
class TritonBackend:
    name: str
    kind: str  # Device.kind served: "cuda" | "rocm"
    priority: int  # --target auto: cuda 30, rocm 20 (above the CPU's 0)
    base: TritonOptions  # this kind's code generation defaults
    timer: Timer | None = None  # how the tuner times a model run; None: CUDA events

    def discover(self) -> Sequence[Device]:
        from luminal.compiler.hardware import amd, nvidia
        from luminal.compiler.hardware.probe import Probe

        found = (nvidia if self.kind == "cuda" else amd).discover(Probe.from_env())
        return tuple(found)

    def capabilities(self, device: Device | None) -> Capabilities:
        return Capabilities(
            dtypes=tuple(d.value for d in DType),
            kernel_kinds=KERNEL_KINDS,
            needs_device_to_compile=False,
        )

    def options(self, request: Request) -> TritonOptions:
        """The request as Triton choices: --tile-m/--tile-n are the default contraction
        tile (rounded up to powers of two >= 16); the per-kernel variants the search
        chose override it kernel by kernel."""
        opts, o = self.base, request.options
        if o.tile_m:
            opts = replace(opts, block_m=o.tile_m)
        if o.tile_n:
            opts = replace(opts, block_n=o.tile_n)
        if request.variants:
            opts = replace(opts, variants=dict(request.variants))
        return opts

    def arch(self, device: Device | None) -> tuple[str, str]:
        """(architecture, where it came from: "device" or "default")."""
        if device is not None and device.arch:
            return device.arch, "device"
        return DEFAULT_ARCH[self.kind], "default"

    def tuner(self, request: Request) -> TritonTuner | None:
        if request.device is None:
            return None  # compiling without the GPU: nothing to time on
        from luminal.compiler.backends.triton.tuner import TritonTuner

        return TritonTuner(self, request, self.timer)

    def codegen(self, request: Request) -> Mapping[str, str]:
        opts = self.options(request)
        arch = self.arch(request.device)[0]
        return {"model.py": codegen.generate(request.sched, opts, arch)}

    def build(self, request: Request, sources: Mapping[str, str]) -> Built:
        opts = self.options(request)
        arch, source = self.arch(request.device)
        device = request.device
        target = {
            "kind": self.kind,
            "backend": self.name,
            "arch": arch,
            "arch_source": source,
            "device_name": device.name if device is not None else None,
            "triton": _triton_version(),
            "abi": ABI,
            "input_precision": opts.input_precision,
            "cuda_graph": opts.cuda_graph,
        }
        codes = codegen.generate_kernels(request.sched, opts)
        notes: dict[str, Any] = {"triton kernels": sum(len(c.launches) for c in codes)}
        if source == "default":
            notes["arch"] = (
                f"no {self.kind} device here: built for {arch} (Triton compiles for the GPU at load)"
            )
        fallbacks = [n for c in codes for n in c.notes]
        if fallbacks:
            notes["variants"] = fallbacks
        members = {
            "model.py": sources["model.py"].encode(),
            "weights.bin": request.sched.weights_blob(),
        }
        return Built(target, members, notes)

    def load(self, manifest: Manifest, members: Mapping[str, bytes]) -> TritonExecutable:
        target = manifest.target
        if target.get("kind") != self.kind:
            raise ArtifactIncompatible(
                f"built for target '{target.get('kind')}'; the '{self.name}' backend runs '{self.kind}'"
            )
        if target.get("abi", ABI) != ABI:
            raise ArtifactIncompatible(
                f"generated-module ABI {target.get('abi')} is not this backend's {ABI}; recompile it"
            )
        device = device_for(target)  # ArtifactIncompatible without the GPU
        source = members["model.py"]
        module = load_module(source.decode(), hashlib.sha256(source).hexdigest()[:16])
        exe = TritonExecutable(module, members["weights.bin"], target, device)
        exe.prepare(cuda_graph=bool(target.get("cuda_graph", True)))
        return exe


def _triton_version() -> str | None:
    """The installed Triton, under any of the names its wheels are published as."""
    for dist in ("triton", "pytorch-triton-rocm", "pytorch-triton"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


@dataclass(frozen=True)
class CudaBackend(TritonBackend):
    """NVIDIA GPUs through Triton (the registry's "cuda")."""

    name: str = "cuda"
    kind: str = "cuda"
    priority: int = 30
    base: TritonOptions = field(default_factory=lambda: TritonOptions.for_kind("cuda"))


@dataclass(frozen=True)
class RocmBackend(TritonBackend):
    """AMD GPUs through Triton (the registry's "rocm")."""

    name: str = "rocm"
    kind: str = "rocm"
    priority: int = 20
    base: TritonOptions = field(default_factory=lambda: TritonOptions.for_kind("rocm"))


CUDA_BACKEND = CudaBackend()
ROCM_BACKEND = RocmBackend()
