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

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from luminal.references.quant_steps import is_quantized_file

#: The two optimization levels whose runs are compared (onnxruntime.GraphOptimizationLevel).
LEVELS = ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL")


def reference_spread(path: Path | None, feeds: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Per output of a quantized ONNX model at `path`, the largest difference between ONNX
    Runtime's optimized and unoptimized runs on `feeds` (module docstring); {} for a model
    without quantization or anything that is not an .onnx file."""
    if not is_quantized_file(path):
        return {}
    runs = [_run(Path(path), feeds, level) for level in LEVELS]
    spread = {}
    for name, first in runs[0].items():
        a, b = np.asarray(first), np.asarray(runs[1][name])
        if a.dtype.kind in "iub":
            d = float(np.abs(a.astype(np.int64) - b.astype(np.int64)).max(initial=0))
        else:
            with np.errstate(invalid="ignore"):
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            d = float(diff[np.isfinite(diff)].max(initial=0.0))
        if d > 0:
            spread[name] = d
    return spread


def _run(path: Path, feeds: Mapping[str, np.ndarray], level: str) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    outputs = session.run(names, {k: v for k, v in feeds.items() if k in wanted})
    return dict(zip(names, outputs, strict=True))


__all__ = ["LEVELS", "reference_spread"]
