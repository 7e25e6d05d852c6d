"""The CPU backend as a registry entry: this machine's CPU, C code, a shared library.

`compile_model` runs the CPU path step by step itself (compiler/pipeline.py); this object
is what the registry, `--target auto`, `luminal devices` and the search see of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from luminal.compiler.backends.protocol import Built, Capabilities, Executable
from luminal.compiler.backends.timing import measure
from luminal.compiler.hardware import Probe, cpu_device, detect_cpu
from luminal.compiler.hardware.device import Device
from luminal.compiler.ir import DType

if TYPE_CHECKING:
    from luminal.compiler.pipeline import CompileOptions
    from luminal.compiler.schedule import Schedule


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

    def codegen(
        self, sched: Schedule, options: CompileOptions, device: Device | None
    ) -> Mapping[str, str]:
        from luminal.compiler.backends.cpu import codegen, toolchain

        _, features = toolchain.feature_flags(detect_cpu())
        tc = toolchain.find_toolchain()
        cg = codegen.options_for(
            features, options.openmp and tc.openmp, options.tile_m, options.tile_n
        )
        return {"model.c": codegen.generate(sched, cg)}

    def compile(self, sched: Schedule, options: CompileOptions, device: Device | None) -> Built:
        from luminal.compiler.backends.cpu import toolchain

        cpu = detect_cpu()
        flags, features = toolchain.feature_flags(cpu)
        tc = toolchain.find_toolchain()
        source = self.codegen(sched, options, device)["model.c"]
        library = toolchain.build_shared_library(source, tc, flags)
        target = {
            "kind": "cpu",
            "backend": "cpu",
            "arch": cpu.arch,
            "cpu_features": list(features),
            "cpu_model": cpu.model,
            "toolchain": tc.describe(),
        }
        return Built(
            target,
            {"model.so": library, "weights.bin": sched.weights_blob(), "model.c": source.encode()},
        )

    def load(self, manifest: Mapping[str, Any], members: Mapping[str, bytes]) -> Executable:
        from luminal.compiler.artifact import Artifact
        from luminal.compiler.runtime.session import open_cpu

        return open_cpu(None, Artifact(manifest, members))

    def time(self, exe: Executable, feeds: Mapping[str, np.ndarray], repeats: int) -> list[float]:
        return measure(exe, feeds, repeats)
