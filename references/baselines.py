"""Baselines: what the customer runs today, as plug-ins behind one interface.

A `Baseline` opens the customer's original model file and returns a `Runner`: a callable
from named numpy inputs to named numpy outputs, plus `info` (versions, providers, options)
that goes into the report.  Built in:

    onnxruntime     ONNX Runtime with every execution provider present (TensorRT, CUDA,
                    ROCm, CPU, in that order of preference), graph optimizations at ORT's
                    default unless `graph_optimization=` is given
    torch           PyTorch eager on a .pt2 ExportedProgram
    torch-compile   torch.compile (inductor by default) on a .pt2 ExportedProgram
    tvm             Apache TVM (Relax, llvm target) on an ONNX model, when `apache-tvm`
                    is installed

Others arrive through the entry-point group `luminal.baselines`: the entry point names a
class (or factory) whose instances satisfy `Baseline`.  A plug-in may not reuse a built-in
name.  Every baseline runs on the thread count it is given, the same as luminal's.

This is the one registry of external runtimes: `luminal bench` times a baseline, and
`luminal run --compare` (`references.oracle`) opens the same entry for one run of
reference outputs, so a runtime is loaded, configured and called in one place.
"""

from __future__ import annotations

import importlib.metadata
import json
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from luminal.errors import UsageError

ENTRY_POINT_GROUP = "luminal.baselines"

Feeds = Mapping[str, np.ndarray]
Outputs = dict[str, np.ndarray]

#: ONNX Runtime execution providers a baseline uses when present, best first.
ORT_PROVIDERS = (
    "TensorrtExecutionProvider",
    "CUDAExecutionProvider",
    "ROCMExecutionProvider",
    "CPUExecutionProvider",
)


@dataclass(frozen=True)
class BaselineOptions:
    """What every baseline is told: the thread count (same as luminal's; None leaves the
    runtime's own default, which is what a one-run oracle wants) and free-form settings
    (`--baseline-opt KEY=VALUE`) that a baseline interprets or refuses."""

    threads: int | None
    settings: Mapping[str, str] = field(default_factory=dict)

    def take(self, known: tuple[str, ...], baseline: str) -> dict[str, str]:
        unknown = sorted(set(self.settings) - set(known))
        if unknown:
            allowed = ", ".join(known) or "none"
            raise UsageError(f"baseline {baseline}: unknown option(s) {unknown} (known: {allowed})")
        return dict(self.settings)


@dataclass(frozen=True)
class Runner:
    """An opened baseline: call it with the feeds, get the outputs."""

    run: Callable[[Feeds], Outputs]
    info: Mapping[str, object]

    def __call__(self, feeds: Feeds) -> Outputs:
        return self.run(feeds)


@runtime_checkable
class Baseline(Protocol):
    name: str
    formats: tuple[str, ...]  # model file suffixes it runs, e.g. (".onnx",)

    def open(self, model: Path, options: BaselineOptions) -> Runner: ...


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise UsageError(
            "onnxruntime is not installed: pip install 'luminal[onnxruntime]'"
        ) from None
    return onnxruntime


def onnxruntime_session(
    path: Path,
    *,
    providers: tuple[str, ...],
    threads: int | None = None,
    graph_optimization: str | None = None,
) -> Any:
    """An `onnxruntime.InferenceSession` on `path`; `threads` sets the intra-op pool size and
    `graph_optimization` (disable, basic, extended, all) the level; None keeps ORT's default."""
    ort = _import_onnxruntime()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = threads
    if graph_optimization is not None:
        levels = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }
        if graph_optimization not in levels:
            raise UsageError(
                f"graph optimization '{graph_optimization}': choose from {', '.join(levels)}"
            )
        options.graph_optimization_level = levels[graph_optimization]
    try:
        return ort.InferenceSession(str(path), options, providers=list(providers))
    except Exception as err:  # onnxruntime raises its own untyped errors
        raise UsageError(
            f"{path}: ONNX Runtime cannot load it ({' '.join(str(err).split())[:300]})"
        ) from None


class OnnxRuntime:
    name = "onnxruntime"
    formats = (".onnx",)

    def open(self, model: Path, options: BaselineOptions) -> Runner:
        ort = _import_onnxruntime()
        s = options.take(("graph_optimization", "providers"), self.name)
        present = ort.get_available_providers()
        wanted = tuple(s["providers"].split(",")) if "providers" in s else ORT_PROVIDERS
        providers = tuple(p for p in wanted if p in present)
        if not providers:
            raise UsageError(f"onnxruntime: none of {list(wanted)} is available here ({present})")
        session = onnxruntime_session(
            model,
            providers=providers,
            threads=options.threads,
            graph_optimization=s.get("graph_optimization"),
        )
        names = [o.name for o in session.get_outputs()]
        inputs = {i.name for i in session.get_inputs()}

        def run(feeds: Feeds) -> Outputs:
            if set(feeds) != inputs:
                raise UsageError(
                    f"{model}: ONNX Runtime takes inputs {sorted(inputs)}, given {sorted(feeds)}"
                )
            return dict(zip(names, session.run(names, dict(feeds)), strict=True))

        info = {
            "version": ort.__version__,
            "providers": list(session.get_providers()),
            "providers_present": list(present),
            "graph_optimization": s.get("graph_optimization", "default (all)"),
            "intra_op_num_threads": options.threads,
        }
        return Runner(run, info)


class TorchEager:
    name = "torch"
    formats = (".pt2",)

    def open(self, model: Path, options: BaselineOptions) -> Runner:
        import torch

        options.take((), self.name)
        if options.threads is not None:
            torch.set_num_threads(options.threads)
        module, names = torch_program(model)
        return Runner(_torch_run(module, names), _torch_info(torch, options, "eager"))


class TorchCompile:
    name = "torch-compile"
    formats = (".pt2",)

    def open(self, model: Path, options: BaselineOptions) -> Runner:
        import torch

        s = options.take(("backend", "mode"), self.name)
        if options.threads is not None:
            torch.set_num_threads(options.threads)
        module, names = torch_program(model)
        backend = s.get("backend", "inductor")
        compiled = torch.compile(module, backend=backend, mode=s.get("mode"))
        info = _torch_info(torch, options, "torch.compile")
        info.update(backend=backend, mode=s.get("mode", "default"))
        return Runner(_torch_run(compiled, names), info)


def _torch_run(module: Any, names: list[str]) -> Callable[[Feeds], Outputs]:
    import torch

    def run(feeds: Feeds) -> Outputs:
        args = [torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in names]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.inference_mode():
                return torch_outputs(module(*args))

    return run


def _torch_info(torch: Any, options: BaselineOptions, mode: str) -> dict[str, object]:
    return {"version": torch.__version__, "mode": mode, "num_threads": torch.get_num_threads()}


def torch_program(path: Path) -> tuple[Any, list[str]]:
    """The eager module of a .pt2 ExportedProgram (read safely) and its user input names."""
    from torch.export.graph_signature import InputKind

    from luminal.compiler.frontend import pt2_archive

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = pt2_archive.read_exported(path)
        names = [
            s.arg.name for s in ep.graph_signature.input_specs if s.kind is InputKind.USER_INPUT
        ]
        return ep.module(), names


def torch_outputs(result: Any) -> Outputs:
    """Outputs named as the torch frontend names them: output0, output1, ..."""
    flat = result if isinstance(result, (tuple, list)) else (result,)
    return {f"output{k}": t.detach().numpy() for k, t in enumerate(flat)}


class Tvm:
    """Apache TVM's Relax flow: ONNX -> Relax -> legalized and built for `llvm` on this
    CPU (LLVM's name for the host CPU, e.g. `{"kind": "llvm", "mcpu": "znver4"}`, unless
    `target=` says otherwise, as JSON or as a target string) -> the Relax VM.  Relax's
    default (un-tuned) schedules are used: no MetaSchedule tuning is run."""

    name = "tvm"
    formats = (".onnx",)

    def open(self, model: Path, options: BaselineOptions) -> Runner:
        try:
            import tvm
            from tvm import relax
            from tvm.relax.frontend.onnx import from_onnx
        except ImportError:
            raise UsageError("the tvm baseline needs apache-tvm: pip install apache-tvm") from None
        import onnx

        s = options.take(("target",), self.name)
        spec = s.get("target") or json.dumps(_tvm_host_target(tvm))
        try:
            target = tvm.target.Target(json.loads(spec) if spec.startswith("{") else spec)
        except Exception as err:  # TVM raises its own untyped errors
            raise UsageError(f"tvm: target {spec!r}: {' '.join(str(err).split())[:200]}") from None
        proto = onnx.load(str(model))
        names = [o.name for o in proto.graph.output]
        mod = from_onnx(proto, keep_params_in_input=False)
        mod = relax.transform.DecomposeOpsForInference()(mod)
        mod = relax.transform.LegalizeOps()(mod)
        build = getattr(tvm, "compile", None) or relax.build
        executable = build(mod, target=target)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        order = [i.name for i in proto.graph.input if i.name not in _initializers(proto)]
        to_device = getattr(tvm.runtime, "tensor", None) or tvm.nd.array

        def run(feeds: Feeds) -> Outputs:
            result = vm["main"](*[to_device(np.ascontiguousarray(feeds[n])) for n in order])
            flat = list(result) if not hasattr(result, "numpy") else [result]
            return {n: r.numpy() for n, r in zip(names, flat, strict=True)}

        return Runner(run, {"version": tvm.__version__, "target": str(target)})


def _tvm_host_target(tvm: Any) -> dict[str, str]:
    """LLVM for this CPU, named explicitly (`mcpu=native` falls back to a generic CPU when
    TVM's LLVM triple differs from the host's: a sandbagged baseline)."""
    try:
        from tvm.target import codegen

        return {"kind": "llvm", "mcpu": str(codegen.llvm_get_system_cpu())}
    except (ImportError, AttributeError):
        return {"kind": "llvm", "mcpu": "native"}


def _initializers(proto: Any) -> set[str]:
    return {t.name for t in proto.graph.initializer}


BUILTIN: dict[str, Callable[[], Baseline]] = {
    "onnxruntime": OnnxRuntime,
    "torch": TorchEager,
    "torch-compile": TorchCompile,
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
    return {d: _version(d) for d in ("numpy", "onnxruntime", "torch", "onnx", "apache-tvm")}
