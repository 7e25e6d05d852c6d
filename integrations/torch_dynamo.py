"""`torch.compile(model, backend="luminal")`: a TorchDynamo backend.

    import torch
    compiled = torch.compile(model, backend="luminal")   # registered by entry point
    y = compiled(x)

Dynamo hands the backend each captured FX graph with example inputs.  The graph is
exported (`torch.export`, core-ATen decomposition), lowered by luminal's PyTorch frontend,
compiled for the local CPU and returned as a callable that converts torch tensors to and
from numpy around one native call.  A graph luminal cannot take (an unsupported op,
dynamic shapes, inputs on another device, a graph that needs autograd) runs eagerly
instead; the reason is logged as a warning on the `luminal.integrations.torch_dynamo`
logger.  A missing or insufficient license is not such a graph: its LicenseError (the
one `compile_model` raises for every caller, `luminal compile` included) propagates, so
`torch.compile` is refused rather than silently running unlicensed work eagerly.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

from luminal.compiler.frontend import torch as torch_frontend
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.frontend.pt2_archive import one_line
from luminal.compiler.pipeline import CompileOptions
from luminal.compiler.runtime import Session
from luminal.errors import FrontendError, LicenseError, LuminalError, UnsupportedOp
from luminal.integrations.build import compile_to_session

log = logging.getLogger(__name__)

#: torch dtypes whose tensors convert to numpy without copying through another type
_NUMPY_DTYPES = {
    torch.float64,
    torch.float32,
    torch.float16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
}


def luminal(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any
) -> Callable[..., Any]:
    """The backend: a compiled callable for `gm`, or `gm.forward` when luminal cannot
    take the graph (with the reason logged)."""
    options = kwargs.get("options") or {}
    try:
        return compile_graph(gm, example_inputs, CompileOptions(**options))
    except LicenseError:
        raise
    except LuminalError as err:
        log.warning("luminal could not compile a graph; running it eagerly: %s", err)
        return gm.forward


def compile_graph(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: CompileOptions
) -> Callable[..., Any]:
    """Compile `gm` for these example inputs; raises a LuminalError when it cannot."""
    _check_inputs(example_inputs)
    loaded, out_spec = _lower(gm, tuple(example_inputs))
    session = compile_to_session(loaded, options)
    return _Compiled(session, [s.name for s in loaded.graph.input_specs()], out_spec)


def _check_inputs(example_inputs: Sequence[Any]) -> None:
    for k, t in enumerate(example_inputs):
        if not isinstance(t, torch.Tensor):
            raise UnsupportedOp(
                f"graph input {k} is a {type(t).__name__} (dynamic shapes are not supported)"
            )
        if t.device.type != "cpu":
            raise UnsupportedOp(f"graph input {k} is on {t.device} (luminal compiles for the CPU)")
        if t.dtype not in _NUMPY_DTYPES:
            raise UnsupportedOp(f"graph input {k} has dtype {t.dtype}")
        if t.requires_grad and torch.is_grad_enabled():
            raise UnsupportedOp(
                "the graph needs autograd (inference only: wrap calls in torch.no_grad())"
            )


def _lower(gm: torch.fx.GraphModule, args: tuple[Any, ...]) -> tuple[LoadedModel, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(gm, args, strict=False)
    except Exception as err:  # torch raises many types; the first line says what failed
        raise FrontendError(f"torch.export could not trace the graph: {one_line(err)}") from None
    loaded = torch_frontend.from_exported_program(ep, source="torch.compile graph")
    if len(loaded.graph.inputs) != len(args):
        raise UnsupportedOp(
            f"the graph takes {len(args)} inputs, {len(loaded.graph.inputs)} of them tensors"
        )
    return loaded, ep.call_spec.out_spec


class _Compiled:
    """Runs the compiled graph on torch tensors."""

    def __init__(self, session: Session, names: list[str], out_spec: Any) -> None:
        self.session = session
        self.names = names
        self.out_spec = out_spec
        self.outputs = [s.name for s in session.outputs]

    def __call__(self, *args: torch.Tensor) -> Any:
        feeds = {n: _to_numpy(t) for n, t in zip(self.names, args, strict=True)}
        results = self.session.run(feeds)
        tensors = [torch.from_numpy(results[n]) for n in self.outputs]
        if self.out_spec is None:
            return tensors
        return pytree.tree_unflatten(tensors, self.out_spec)


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().contiguous().numpy()


def register() -> None:
    """Register the backend by name in this process (the entry point does it for every
    process; this is for environments that skip entry points)."""
    from torch._dynamo import list_backends, register_backend

    if "luminal" not in list_backends(exclude_tags=()):
        register_backend(luminal, name="luminal")


__all__ = ["compile_graph", "luminal", "register"]
