"""Baselines: what the customer runs today, as plug-ins behind one interface.

A `Baseline` opens the customer's original model and returns a `Runner`: a callable from
named numpy inputs to named numpy outputs, plus `info` that says exactly what is timed
(object, mode, options, threads) and goes into the report.  Built in, one module each:

    onnxruntime     onnx_runtime   an InferenceSession with every execution provider present,
                                   or the customer's SessionOptions (`--baseline-options`)
    torch           pytorch        the customer's own nn.Module (`--model net.py:FACTORY`),
                                   eager or as they compiled it, or a .pt2's
                                   `ExportedProgram.module()`; under `torch.inference_mode`
    torch-compile   pytorch        `torch.compile` of the same module (inductor by default)
    openvino        openvino_cpu   OpenVINO `compile_model` on the ONNX model, latency hint,
                                   f32, one infer request reused
    tvm             tvm_relax      Apache TVM (Relax, llvm target), when installed

Others arrive through the entry-point group `luminal.baselines`: the entry point names a
class (or factory) whose instances satisfy `Baseline`.  A plug-in may not reuse a built-in
name.  Every baseline runs on the thread count it is given, the same as luminal's, unless
the customer's options file sets its own (the runner's `info` then says so).

This is the one registry of external runtimes: `luminal bench` times a baseline, and
`luminal run --compare` (`references.oracle`) opens the same entry for one run of
reference outputs, so a runtime is loaded, configured and called in one place.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from pathlib import Path

from luminal.errors import UsageError
from luminal.references.baselines.base import (
    Baseline,
    BaselineOptions,
    Feeds,
    OptionsFile,
    Outputs,
    Runner,
    read_options_file,
    version,
)
from luminal.references.baselines.onnx_runtime import ORT_PROVIDERS, OnnxRuntime
from luminal.references.baselines.openvino_cpu import OpenVino
from luminal.references.baselines.pytorch import (
    TorchCompile,
    TorchEager,
    split_module_ref,
    torch_outputs,
    torch_program,
)
from luminal.references.baselines.tvm_relax import Tvm

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "ORT_PROVIDERS",
    "Baseline",
    "BaselineOptions",
    "Feeds",
    "OptionsFile",
    "Outputs",
    "Runner",
    "check_model",
    "get",
    "open_baseline",
    "read_options_file",
    "registry",
    "split_module_ref",
    "torch_outputs",
    "torch_program",
    "versions",
]

ENTRY_POINT_GROUP = "luminal.baselines"

BUILTIN: dict[str, Callable[[], Baseline]] = {
    "onnxruntime": OnnxRuntime,
    "torch": TorchEager,
    "torch-compile": TorchCompile,
    "openvino": OpenVino,
    "tvm": Tvm,
}


def registry() -> dict[str, Callable[[], Baseline]]:
    """Built-in baselines plus those from the `luminal.baselines` entry points (loaded
    lazily: an entry point is imported only when its baseline is asked for)."""
    found: dict[str, Callable[[], Baseline]] = dict(BUILTIN)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in found:
            raise UsageError(
                f"baseline plug-in {ep.value} reuses the name '{ep.name}' of another baseline"
            )
        found[ep.name] = _lazy(ep)
    return found


def _lazy(ep: importlib.metadata.EntryPoint) -> Callable[[], Baseline]:
    def make() -> Baseline:
        try:
            factory = ep.load()
        except Exception as err:
            raise UsageError(
                f"baseline plug-in {ep.name} ({ep.value}) fails to load: {err}"
            ) from None
        baseline = factory()
        if not isinstance(baseline, Baseline):
            raise UsageError(f"baseline plug-in {ep.name} ({ep.value}) is not a Baseline")
        return baseline

    return make


def get(name: str) -> Baseline:
    found = registry()
    if name not in found:
        raise UsageError(f"unknown baseline '{name}'; choose from {', '.join(found)}")
    return found[name]()


def open_baseline(name: str, model: Path, options: BaselineOptions) -> tuple[Baseline, Runner]:
    """The named baseline opened on `model` (its file type checked first)."""
    baseline = check_model(name, model)
    return baseline, baseline.open(model, options)


def check_model(name: str, model: Path) -> Baseline:
    """The named baseline, if it can run `model` (a file of one of its formats)."""
    baseline = get(name)
    if model.suffix.lower() not in baseline.formats:
        raise UsageError(
            f"{model}: baseline {name} runs {', '.join(baseline.formats)} models; "
            f"this is a '{model.suffix}' file"
        )
    if not model.is_file():
        raise UsageError(f"{model}: no such baseline model file")
    return baseline


def versions() -> dict[str, str]:
    """Versions of the runtimes a report names."""
    dists = ("numpy", "onnxruntime", "torch", "onnx", "openvino", "apache-tvm")
    return {d: version(d) for d in dists}
