"""f16 and bf16 in the ONNX frontend: every op computes in f32 and rounds its results once.

An op's f16/bf16 inputs are widened to f32 before it is lowered (`widen`) and its f32
results are rounded back to the type ONNX gives them (`narrow`), as the ONNX reference and
ONNX Runtime's CPU kernels compute: one rounding per op, not one per primitive.  The C
backend then sees f16/bf16 only in loads, stores and casts.
"""

from __future__ import annotations

import onnx

from luminal.compiler.ir import DType, GraphBuilder, Value
from luminal.compiler.ir.dtypes import ONNX_DTYPES

NARROW_FLOATS = (DType.F16, DType.BF16)


class ValueTypes:
    """Element types ONNX shape inference gives every value, computed on first use."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self._types: dict[str, DType] | None = None

    def get(self, name: str) -> DType | None:
        if self._types is None:
            self._types = {}
            try:
                inferred = onnx.shape_inference.infer_shapes(self.model).graph
            except Exception:  # inference is a hint here; the fallback rule applies
                return None
            for v in (*inferred.value_info, *inferred.output, *inferred.input):
                dtype = ONNX_DTYPES.get(v.type.tensor_type.elem_type)
                if dtype is not None:
                    self._types[v.name] = dtype
        return self._types.get(name)


def widen(b: GraphBuilder, inputs: list[Value | None]) -> tuple[list[Value | None], set[DType]]:
    """f16 and bf16 operands become f32: every op computes in f32 and rounds its results
    once (`narrow`), as the ONNX reference and ONNX Runtime's CPU kernels do."""
    narrow = {v.dtype for v in inputs if v is not None and v.dtype in NARROW_FLOATS}
    if not narrow:
        return inputs, narrow
    return [
        b.cast(v, DType.F32) if v is not None and v.dtype in NARROW_FLOATS else v for v in inputs
    ], narrow


def narrow(
    b: GraphBuilder,
    node: onnx.NodeProto,
    name: str,
    value: Value,
    original: list[DType | None],
    types: ValueTypes,
) -> Value:
    """Round an f32 result back to the narrow type ONNX gives it.  Where shape inference
    has no type (values inside a function body), CastLike takes its second input's type,
    Cast keeps f32, and other ops the one narrow type of their inputs."""
    if value.dtype is not DType.F32:
        return value
    want = types.get(name)
    if want is None and node.op_type == "CastLike" and len(original) > 1:
        want = original[1]
    elif want is None and node.op_type != "Cast":
        kinds = {d for d in original if d in NARROW_FLOATS}
        if len(kinds) == 1 and DType.F32 not in original:
            want = next(iter(kinds))
    return b.cast(value, want) if want in NARROW_FLOATS else value
