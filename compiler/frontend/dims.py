"""Which input axes of a model file are symbolic, and by what name (a shape profile's dims)."""

from __future__ import annotations

import os
from pathlib import Path

import onnx

from luminal.errors import ModelLoadError, UsageError


def symbolic_axes(path: str | os.PathLike[str]) -> dict[str, dict[int, str]]:
    """input name -> axis -> dim name, for every named symbolic dim (`dim_param`) of an
    ONNX model's graph inputs (initializers excluded); the weights are not read."""
    file = Path(path)
    if file.suffix.lower() != ".onnx":
        raise UsageError(
            f"{file}: shape profiles need an ONNX model (a .pt2 program is exported at one shape)"
        )
    try:
        model = onnx.load(str(file), load_external_data=False)
    except Exception as err:
        raise ModelLoadError(file, f"not a valid ONNX file ({err})") from None
    weights = {i.name for i in model.graph.initializer}
    axes: dict[str, dict[int, str]] = {}
    for inp in model.graph.input:
        if inp.name in weights or not inp.type.HasField("tensor_type"):
            continue
        for k, dim in enumerate(inp.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value") and dim.dim_param:
                axes.setdefault(inp.name, {})[k] = dim.dim_param
    return axes


def bind_shapes(
    axes: dict[str, dict[int, str]], shapes: dict[str, tuple[int, ...]]
) -> dict[str, int]:
    """`--shapes` as dim bindings: each named input's symbolic axes take its given sizes."""
    dims: dict[str, int] = {}
    for name, shape in shapes.items():
        for k, dim in axes.get(name, {}).items():
            if k >= len(shape):
                raise UsageError(f"--shapes {name}: {len(shape)} dims given, axis {k} is '{dim}'")
            if dims.setdefault(dim, shape[k]) != shape[k]:
                raise UsageError(
                    f"--shapes gives dim '{dim}' two sizes: {dims[dim]} and {shape[k]} ({name})"
                )
    return dims
