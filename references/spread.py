"""The reference's own spread on a quantized model: how far ONNX Runtime's int8 run moves
between two executions it considers equivalent, the input of `references.parity`'s spread
rule (its docstring).

    reference_spread(path, feeds) -> {output name: max |optimized - unoptimized|}

ONNX Runtime runs a QDQ unit (DequantizeLinear -> Conv -> QuantizeLinear) as one integer
kernel when its graph optimizer fuses it, and as float arithmetic between the two casts when
it does not; which units it fuses depends on the optimization level (and on its version and
the unit's shape).  The two runs compared are the CPU provider with every graph optimization
(`ORT_ENABLE_ALL`, what `luminal bench` runs as the baseline) and with none
(`ORT_DISABLE_ALL`, the model's ops as written), on the same inputs, each at ONNX Runtime's
own thread default.  Only a model with quantization gets a spread: any QuantizeLinear,
DynamicQuantizeLinear, integer contraction or QLinear op (`quant_steps.is_quantized`);
every other model returns {} without running anything (`quant_steps.is_quantized_file`).  An output the two runs agree on
bit for bit is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from luminal.references.quant_steps import is_quantized_file

#: The two optimization levels whose runs are compared (onnxruntime.GraphOptimizationLevel).
LEVELS = ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL")


def reference_spread(path: Path | None, feeds: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Per output of a quantized ONNX model at `path`, the largest difference between ONNX
    Runtime's optimized and unoptimized runs on `feeds` (module docstring); {} for a model
    without quantization or anything that is not an .onnx file."""
    probe = open_spread(path)
    return probe(feeds) if probe is not None else {}


def open_spread(path: Path | None) -> Callable[[Mapping[str, np.ndarray]], dict[str, float]] | None:
    """`reference_spread` with both ONNX Runtime sessions opened once, for several input
    sets (bench); None for a model without quantization."""
    if not is_quantized_file(path):
        return None
    assert path is not None
    sessions = [_session(Path(path), level) for level in LEVELS]

    def spread(feeds: Mapping[str, np.ndarray]) -> dict[str, float]:
        runs = [_run(session, feeds) for session in sessions]
        out = {}
        for name, first in runs[0].items():
            d = _max_difference(np.asarray(first), np.asarray(runs[1][name]))
            if d > 0:
                out[name] = d
        return out

    return spread


def _max_difference(a: np.ndarray, b: np.ndarray) -> float:
    if a.dtype.kind in "iub":
        return float(np.abs(a.astype(np.int64) - b.astype(np.int64)).max(initial=0))
    with np.errstate(invalid="ignore"):
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return float(diff[np.isfinite(diff)].max(initial=0.0))


def _session(path: Path, level: str) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _run(session: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    outputs = session.run(names, {k: v for k, v in feeds.items() if k in wanted})
    return dict(zip(names, outputs, strict=True))


__all__ = ["LEVELS", "open_spread", "reference_spread"]
