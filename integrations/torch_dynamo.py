"""`torch.compile(model, backend="luminal")`: a TorchDynamo backend.

    import torch
    compiled = torch.compile(model, backend="luminal")   # registered by entry point
    y = compiled(x)

Dynamo hands the backend each captured FX graph with example inputs.  The graph is
exported (`torch.export`, core-ATen decomposition), lowered by luminal's PyTorch frontend,
compiled for the local CPU and returned as a callable that converts torch tensors to and
from numpy around one native call.  A graph with symbolic sizes (`dynamic=True`, or a
dim Dynamo saw change) compiles once as a shape profile (compiler/shapes): every size
from 1 to max(DYNAMIC_MAX, twice the first) runs in it without a recompile.  Dynamo
itself specializes sizes 0 and 1 into a graph of their own unless
`torch.fx.experimental._config.backed_size_oblivious = True`.  A graph luminal cannot
take (an unsupported op, inputs on another device, a graph that needs autograd) runs
eagerly instead; the reason is logged as a warning on the `luminal.integrations.torch_dynamo`
logger.  A missing or insufficient license is not such a graph: its LicenseError (the
one `compile_model` raises for every caller, `luminal compile` included) propagates, so
`torch.compile` is refused rather than silently running unlicensed work eagerly.
"""

from __future__ import annotations

import copy
import logging
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.fx.experimental._config as fx_config
import torch.utils._pytree as pytree

from luminal.compiler.frontend import torch as torch_frontend
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.frontend.pt2_archive import one_line
from luminal.compiler.pipeline import CompileOptions
from luminal.compiler.runtime import Session
from luminal.compiler.runtime import load as runtime_load
from luminal.compiler.shapes.build import compile_points
from luminal.compiler.shapes.profile import fit_profile
from luminal.errors import FrontendError, LicenseError, LuminalError, UnsupportedOp
from luminal.integrations.build import compile_to_session

log = logging.getLogger(__name__)
#: A symbolic size is served from 1 to at least this (or twice its first example).
DYNAMIC_MAX = 64

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
    if any(isinstance(x, torch.SymInt) for x in example_inputs):
        return compile_dynamic(gm, example_inputs, options)
    _check_inputs(example_inputs)
    loaded, out_spec = _lower(gm, tuple(example_inputs))
    session = compile_to_session(loaded, options)
    return _Compiled(session, [s.name for s in loaded.graph.input_specs()], out_spec)


def compile_dynamic(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: CompileOptions
) -> Callable[..., Any]:
    """A graph with symbolic sizes (`dynamic=True`, or a dim Dynamo found changing):
    one shape-profile compile serves every size of each symbol from 1 to
    max(DYNAMIC_MAX, its example size x 2), tuned at the example size.

    Each argument is a tensor (compiled as an input), a SymInt (the size of some tensor's
    axis: replaced by that size at each point) or a 0-d tensor that the graph only reads
    with `.item()` (a float attribute Dynamo lifted, LayerNorm's eps: taken as the
    constant it is)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise UnsupportedOp("the graph's placeholders do not match its example inputs")
    kept: list[int] = []  # argument positions that are compiled inputs
    constants: dict[int, float] = {}
    symbolic: list[tuple[Any, ...]] = []  # each kept input's shape, SymInt where symbolic
    hints: dict[str, int] = {}
    axes: dict[str, dict[int, str]] = {}
    for pos, (x, node) in enumerate(zip(example_inputs, placeholders, strict=True)):
        if isinstance(x, torch.SymInt):
            continue
        if _read_as_scalar(x, node):
            constants[pos] = float(x.item())
            continue
        # The example tensors are real (concrete sizes); their symbolic shapes are the
        # placeholders' fake values.
        fake = node.meta.get("example_value")
        shape = tuple(_static(d) for d in (fake if isinstance(fake, torch.Tensor) else x).shape)
        for axis, size in enumerate(shape):
            if isinstance(size, torch.SymInt):
                hints[_symbol(size)] = int(x.shape[axis])
                axes.setdefault(f"in{len(kept)}", {})[axis] = _symbol(size)
        kept.append(pos)
        symbolic.append(shape)
    tensors = [example_inputs[pos] for pos in kept]
    _check_inputs(tensors)
    for x in example_inputs:
        if isinstance(x, torch.SymInt) and _symbol(x) not in hints:
            raise UnsupportedOp(f"symbolic size {x} is not the size of any input's axis")
    profile = fit_profile(
        [(name, 1, max(DYNAMIC_MAX, 2 * n), max(n, 1)) for name, n in sorted(hints.items())]
    )
    names = [f"in{k}" for k in range(len(kept))]

    def concrete(point: Mapping[str, int]) -> tuple[torch.Tensor, ...]:
        """The tensor inputs at the point's sizes (zeros: export only traces shapes)."""
        out = []
        for x, shape in zip(tensors, symbolic, strict=True):
            if any(isinstance(d, torch.SymInt) for d in shape):
                dims = [point[_symbol(d)] if isinstance(d, torch.SymInt) else int(d) for d in shape]
                out.append(torch.zeros(dims, dtype=x.dtype))
            else:
                out.append(x)
        return tuple(out)

    def specialized(point: Mapping[str, int]) -> torch.fx.GraphModule:
        values: dict[int, float | int] = dict(constants)
        for pos, x in enumerate(example_inputs):
            if isinstance(x, torch.SymInt):
                values[pos] = point[_symbol(x)]
        return _specialized(gm, values)

    out_specs: list[Any] = []  # the outputs' structure, the same at every point

    def load(point: Mapping[str, int]) -> LoadedModel:
        loaded, out_spec = _lower(specialized(point), concrete(point), names)
        out_specs.append(out_spec)
        return loaded

    with tempfile.TemporaryDirectory(prefix="luminal-dynamic-") as tmp:
        path = Path(tmp) / "model.lmnl"
        compile_points(load, axes, path, profile, options)
        session = runtime_load(path)
    log.info("luminal compiled a dynamic graph for %s", [d.describe() for d in profile.dims])
    return _Compiled(session, names, out_specs[0], kept)


def _read_as_scalar(x: Any, node: torch.fx.Node) -> bool:
    """A 0-d tensor argument the graph only reads with `.item()`."""
    return (
        isinstance(x, torch.Tensor)
        and x.ndim == 0
        and bool(node.users)
        and all(u.op == "call_method" and u.target == "item" for u in node.users)
    )


def _specialized(
    gm: torch.fx.GraphModule, values: Mapping[int, float | int]
) -> torch.fx.GraphModule:
    """`gm` with placeholder k replaced by the constant `values[k]` (a SymInt's size at
    one point, or the value a 0-d tensor's `.item()` reads), so an export at static sizes
    sees plain numbers.  The copy drops Dynamo's metadata: its fake values carry
    Dynamo's symbols and guards, which that export must not see."""
    graph = copy.deepcopy(gm.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for pos, value in values.items():
        node = placeholders[pos]
        for user in list(node.users):
            if user.op == "call_method" and user.target == "item":
                _replace_uses(user, value)
                graph.erase_node(user)
        _replace_uses(node, value)
        graph.erase_node(node)
    for node in graph.nodes:
        node.meta = {}
    graph.lint()
    return torch.fx.GraphModule(gm, graph)


def _replace_uses(node: torch.fx.Node, value: float | int) -> None:
    for user in list(node.users):
        user.args = torch.fx.node.map_arg(user.args, lambda a: value if a is node else a)
        user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda a: value if a is node else a)


def _static(size: Any) -> Any:
    """A size as an int when it is one (a fake tensor's static sizes may be SymInts)."""
    if isinstance(size, torch.SymInt) and size.node.expr.is_number:
        return int(size.node.expr)
    return size


def _symbol(size: torch.SymInt) -> str:
    expr = size.node.expr
    if not expr.is_symbol:
        raise UnsupportedOp(f"an input's size is the expression {expr}, not one symbol")
    return str(expr)


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


def _lower(
    gm: torch.fx.GraphModule, args: tuple[Any, ...], names: Sequence[str] | None = None
) -> tuple[LoadedModel, Any]:
    # Outside Dynamo's tracing context (the backend runs inside it; an export there takes
    # guards from it that its own decomposition cannot run), and without
    # `backed_size_oblivious` (which a caller sets to keep size 1 symbolic).
    with torch._guards.tracing(None), fx_config.patch(backed_size_oblivious=False):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ep = torch.export.export(gm, args, strict=False)
        except Exception as err:  # torch raises many types; the first line says what failed
            raise FrontendError(
                f"torch.export could not trace the graph: {one_line(err)}"
            ) from None
        loaded = torch_frontend.from_exported_program(
            ep, source="torch.compile graph", input_names=names
        )
    tensors = sum(1 for a in args if isinstance(a, torch.Tensor))
    if len(loaded.graph.inputs) != tensors:
        raise UnsupportedOp(
            f"the graph takes {tensors} tensor inputs, {len(loaded.graph.inputs)} of them compiled"
        )
    return loaded, ep.call_spec.out_spec


class _Compiled:
    """Runs the compiled graph on torch tensors."""

    def __init__(
        self, session: Session, names: list[str], out_spec: Any, kept: list[int] | None = None
    ) -> None:
        self.session = session
        self.names = names
        self.out_spec = out_spec
        self.outputs = [s.name for s in session.outputs]
        self.kept = kept  # the arguments that are inputs (a dynamic graph's SymInts are not)

    def __call__(self, *args: Any) -> Any:
        if self.kept is not None:
            args = tuple(args[pos] for pos in self.kept)
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
