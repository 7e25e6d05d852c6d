"""Which input axes of a model file are symbolic, and by what name (a shape profile's dims)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from luminal.errors import ModelLoadError, UsageError

if TYPE_CHECKING:
    import onnx

#: input name -> axis -> the symbolic dim's name there
Axes = dict[str, dict[int, str]]


def symbolic_axes(path: str | os.PathLike[str]) -> Axes:
    """`axes_of` the ONNX model at `path`, read without its weights."""
    file = Path(path)
    if file.suffix.lower() != ".onnx":
        raise UsageError(
            f"{file}: shape profiles need an ONNX model (a .pt2 program is exported at one shape)"
        )
    import onnx  # where a profile is read: onnx takes 0.6 s to import

    try:
        model = onnx.load(str(file), load_external_data=False)
    except Exception as err:
        raise ModelLoadError(file, f"not a valid ONNX file ({err})") from None
    return axes_of(model)


def axes_of(model: onnx.ModelProto) -> Axes:
    """Every named symbolic dim (`dim_param`) of the graph inputs (initializers excluded)."""
    weights = {i.name for i in model.graph.initializer}
    axes: Axes = {}
    for inp in model.graph.input:
        if inp.name in weights or not inp.type.HasField("tensor_type"):
            continue
        for k, dim in enumerate(inp.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value") and dim.dim_param:
                axes.setdefault(inp.name, {})[k] = dim.dim_param
    return axes


def dim_names(axes: Axes) -> set[str]:
    return {d for ax in axes.values() for d in ax.values()}


def bind_shapes(axes: Axes, shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
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
