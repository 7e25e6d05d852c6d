"""torchvision importable beside the CPU torch, for code that imports `transformers`.

The torchvision wheel on some package indexes is a CUDA build whose C++ ops (NMS,
RoIAlign) cannot load beside a CPU torch, and its import then fails registering fake
kernels for them.  Classification models and `transformers` never call those ops, so
when the plain import fails the two op schemas it registers are declared first and the
import is retried.  `transformers` imports torchvision whenever it is installed, so
anything loading a Hugging Face model calls `torchvision()` first.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

__all__ = ["torchvision"]


@functools.cache
def torchvision() -> Any:
    """The torchvision module, imported (see the module docstring)."""
    import torch

    try:
        import torchvision as tv

        return tv
    except RuntimeError:
        pass
    lib = torch.library.Library("torchvision", "DEF")  # kept alive by the cache below
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[mod]
    import torchvision as tv

    _LIBS.append(lib)
    return tv


_LIBS: list[Any] = []  # the schema library must outlive the import
