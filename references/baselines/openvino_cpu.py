"""OpenVINO on the ONNX model, tuned for latency as OpenVINO documents it.

    core.compile_model(model, "CPU", {PERFORMANCE_HINT: LATENCY,
                                      INFERENCE_PRECISION_HINT: f32,
                                      INFERENCE_NUM_THREADS: threads})

One infer request is created at open and reused for every call (what a latency-bound
deployment does); feeds are shared with OpenVINO rather than copied, as ONNX Runtime reads
numpy feeds in place; outputs are copied out and named by their tensor names.  f32
precision is asked for explicitly: on CPUs with AMX or AVX512-BF16, OpenVINO's default
is bf16 inference, which would not be the same computation as luminal's f32.

`--baseline-options FILE.json` takes `device` (default "CPU") and `properties` (any
OpenVINO properties, merged over the defaults above and checked by OpenVINO itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from luminal.errors import UsageError
from luminal.references.baselines.base import (
    BaselineOptions,
    Feeds,
    Outputs,
    Runner,
    expect,
    one_line,
)


def import_openvino() -> Any:
    try:
        import openvino
    except ImportError:
        raise UsageError(
            "the openvino baseline needs OpenVINO: pip install 'luminal[openvino]'"
        ) from None
    return openvino


def default_properties(threads: int | None) -> dict[str, object]:
    """The latency configuration: OpenVINO's own property names (openvino.properties)."""
    props: dict[str, object] = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}
    if threads is not None:
        props["INFERENCE_NUM_THREADS"] = threads
    return props


class OpenVino:
    name = "openvino"
    formats = (".onnx",)

    def open(self, model: Path, options: BaselineOptions) -> Runner:
        ov = import_openvino()
        options.take((), self.name)
        c = options.take_config(("device", "properties"), self.name)
        device = expect(c.get("device", "CPU"), str, "device")
        given = expect(c.get("properties", {}), dict, "properties")
        props = {**default_properties(options.threads), **given}
        core = ov.Core()
        try:
            compiled = core.compile_model(core.read_model(str(model)), device, props)
        except Exception as err:  # OpenVINO raises its own untyped errors
            raise UsageError(f"{model}: OpenVINO cannot compile it ({one_line(err)})") from None
        request = compiled.create_infer_request()
        ports = [(o.get_any_name(), o) for o in compiled.outputs]
        inputs = {i.get_any_name() for i in compiled.inputs}

        def run(feeds: Feeds) -> Outputs:
            if set(feeds) != inputs:
                raise UsageError(
                    f"{model}: OpenVINO takes inputs {sorted(inputs)}, given {sorted(feeds)}"
                )
            arrays = {k: np.ascontiguousarray(v) for k, v in feeds.items()}
            result = request.infer(arrays, share_inputs=True, share_outputs=False)
            return {name: np.asarray(result[port]) for name, port in ports}

        info = {
            "version": ov.__version__,
            "timed": "openvino InferRequest.infer, one request reused",
            "device": device,
            "properties": _read_back(compiled, props),
        }
        return Runner(run, info)


def _read_back(compiled: Any, props: Mapping[str, object]) -> dict[str, str]:
    """The properties as the compiled model reports them (what actually runs)."""
    out = {}
    for key in props:
        try:
            value = compiled.get_property(key)
            name = getattr(value, "get_type_name", None)  # an element type: its short name
            out[key] = name() if callable(name) else str(value)
        except Exception:  # a write-only or device-specific property
            out[key] = str(props[key])
    return out
