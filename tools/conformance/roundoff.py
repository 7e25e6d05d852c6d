"""The conformance runner's second look at a mismatching case: do our outputs agree with
the expected ones up to round-off in the output's own type?  (`imprecise`, not `wrong`.)"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

_NODE_CASES: dict[str, Any] = {}


def _data_sets(case: Any) -> tuple[Any, list[tuple[list[Any], list[Any]]]]:
    """(model, [(inputs, expected outputs)]) of a case, as BackendTest feeds them."""
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.loader import load_model_tests

    if case.kind == "node":
        if not _NODE_CASES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _NODE_CASES.update({c.name: c for c in load_model_tests(kind="node")})
        tc = _NODE_CASES[case.name]
        norm = [
            ([numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v for v in ins],
             [numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v for v in outs])
            for ins, outs in tc.data_sets
        ]  # fmt: skip
        return tc.model, norm
    tc = next(c for c in load_model_tests(kind=case.kind) if c.name == case.name)
    model = onnx.load(str(Path(tc.model_dir) / "model.onnx"))
    sets = []
    for folder in sorted(Path(tc.model_dir).glob("test_data_set*")):

        def read(kind: str, folder: Path = folder) -> list[Any]:
            files = sorted(folder.glob(f"{kind}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
            return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]

        sets.append((read("input"), read("output")))
    return model, sets


def within_roundoff(case: Any, ulps: float = 4.0) -> bool:
    """Whether a mismatching case's outputs agree with the expected ones up to `ulps`
    units of the output type at the tensor's largest magnitude (same shapes and dtypes)."""
    import numpy as np

    from luminal.integrations.onnx_backend import LuminalBackend

    try:
        model, sets = _data_sets(case)
        rep = LuminalBackend.prepare(model, "CPU")
        for inputs, expected in sets:
            got = list(rep.run(inputs))
            if len(got) != len(expected):
                return False
            for a, e in zip(got, expected, strict=True):
                a, e = np.asarray(a), np.asarray(e)
                if a.shape != e.shape or a.dtype != e.dtype or e.dtype.kind != "f":
                    if not np.array_equal(a, e):
                        return False
                    continue
                a64, e64 = a.astype(np.float64), e.astype(np.float64)
                finite = np.isfinite(e64)
                if not np.array_equal(np.isnan(a64), np.isnan(e64)):
                    return False
                if not np.array_equal(a64[~finite & ~np.isnan(e64)], e64[~finite & ~np.isnan(e64)]):
                    return False
                scale = np.max(np.abs(e64[finite]), initial=0.0)
                slack = (
                    1e-3 * np.abs(e64[finite]) + 1e-7 + ulps * float(np.finfo(e.dtype).eps) * scale
                )
                if not np.all(np.abs(a64[finite] - e64[finite]) <= slack):
                    return False
        return True
    except Exception:
        return False
