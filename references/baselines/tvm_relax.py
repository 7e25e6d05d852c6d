"""Apache TVM's Relax flow on an ONNX model, when `apache-tvm` is installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from luminal.errors import UsageError
from luminal.references.baselines.base import BaselineOptions, Feeds, Outputs, Runner, one_line


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
        options.take_config((), self.name)
        spec = s.get("target") or json.dumps(_tvm_host_target(tvm))
        try:
            target = tvm.target.Target(json.loads(spec) if spec.startswith("{") else spec)
        except Exception as err:  # TVM raises its own untyped errors
            raise UsageError(f"tvm: target {spec!r}: {one_line(err, 200)}") from None
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
