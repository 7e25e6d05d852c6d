"""PyTorch as the customer runs it: their own module, or torch's way of running a `.pt2`.

    --model net.py:FACTORY   the customer's module: `FACTORY()` in net.py returns an
                             eval-mode `nn.Module` (or one it has `torch.compile`d itself)
    --model model.pt2        an ExportedProgram, read safely (`pt2_archive`), run as torch
                             documents: `ExportedProgram.module()`

`torch` times the module eager (or as the factory compiled it), `torch-compile` times
`torch.compile(module)` (inductor unless `backend=`), each call under
`torch.inference_mode()` at `torch.set_num_threads(threads)`.

Why `.module()` of a `.pt2` used to time 1.4-3.3x slower than the nn.Module it came from:
the GraphModule torch builds checks every call's inputs against the program's range
constraints in Python (a forward pre-hook, `_check_input_constraints_pre_hook`, about
130 µs a call on this machine whatever the model's size), while the ATen kernels it calls
are the module's own (the weights' alignment, 16 bytes from `pt2_archive`'s bytearray
against torch's 64, was measured and makes no difference).  A deployment checks its
inputs once; so does this baseline (`_CheckedOnce`: torch's check on the first call of
each input signature, then `forward` directly).
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from luminal.errors import UsageError
from luminal.references.baselines.base import (
    BaselineOptions,
    Feeds,
    Outputs,
    Runner,
    one_line,
)

FORMATS = (".pt2", ".py")


def split_module_ref(text: str) -> tuple[Path, str | None]:
    """`net.py:build` -> (net.py, "build"); any other path -> (path, None)."""
    path, sep, factory = text.rpartition(":")
    if sep and path.lower().endswith(".py") and factory.isidentifier():
        return Path(path), factory
    return Path(text), None


class TorchEager:
    name = "torch"
    formats = FORMATS

    def open(self, model: Path, options: BaselineOptions) -> Runner:
        s = options.take(("factory", "outputs"), self.name)
        options.take_config((), self.name)
        opened = _open_module(model, s, options.threads)
        info = {**opened.info, "mode": opened.compiled or "eager"}
        return Runner(_torch_run(opened.call, opened.inputs, s), info)


class TorchCompile:
    name = "torch-compile"
    formats = FORMATS

    def open(self, model: Path, options: BaselineOptions) -> Runner:
        import torch

        s = options.take(("backend", "mode", "factory", "outputs"), self.name)
        options.take_config((), self.name)
        opened = _open_module(model, s, options.threads, checked=False)
        if opened.compiled:  # the factory compiled it: time that, not a second compile
            return Runner(
                _torch_run(opened.call, opened.inputs, s), {**opened.info, "mode": opened.compiled}
            )
        backend, mode = s.get("backend", "inductor"), s.get("mode")
        compiled = torch.compile(opened.call, backend=backend, mode=mode)
        info = {
            **opened.info,
            "mode": "torch.compile",
            "backend": backend,
            "compile_mode": mode or "default",
        }
        return Runner(_torch_run(compiled, opened.inputs, s), info)


@dataclass(frozen=True)
class _Opened:
    """A module ready to call: the callable, its input names in order (None: positional in
    the feeds' order), how it is already compiled (None: eager), what the report says of it."""

    call: Any
    inputs: list[str] | None
    compiled: str | None
    info: dict[str, object]


def _open_module(
    model: Path, s: Mapping[str, str], threads: int | None, *, checked: bool = True
) -> _Opened:
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    base: dict[str, object] = {
        "version": torch.__version__,
        "inference_mode": True,
        "num_threads": torch.get_num_threads(),
    }
    if model.suffix.lower() == ".py":
        module, label = load_factory(model, s.get("factory"))
        compiled = _compiled_by_factory(module)
        inner = getattr(module, "_orig_mod", module)
        base["module"] = label
        if compiled:
            base["compiled_by"] = "the factory (torch.compile)"
        return _Opened(module, _forward_names(inner), compiled, base)
    if "factory" in s:
        raise UsageError(f"{model}: factory= names a callable in a .py file, not in a .pt2")
    module, names = torch_program(model)
    base["module"] = f"torch.export.ExportedProgram.module() of {model.name}"
    if checked:
        base["input_check"] = "torch's, on the first call of each input shape"
        return _Opened(_CheckedOnce(module), names, None, base)
    return _Opened(module, names, None, base)


def load_factory(path: Path, factory: str | None) -> tuple[Any, str]:
    """The module `factory()` in the customer's Python file returns (eval mode, checked),
    and how the report names it.  The file runs as the customer's own code: it is their
    model, named by them on the command line, as `python net.py` would run it."""
    import torch

    if not factory:
        raise UsageError(f"{path}: name the callable that builds the model: --model {path}:FACTORY")
    if not path.is_file():
        raise UsageError(f"{path}: no such Python file")
    name = f"_luminal_baseline_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: not a Python file Python can import")
    code = importlib.util.module_from_spec(spec)
    sys.modules[name] = code  # as an import would: dataclasses and pickling look it up
    sys.path.insert(0, str(path.resolve().parent))  # so the file imports its neighbours
    try:
        spec.loader.exec_module(code)
        make = getattr(code, factory, None)
        if not callable(make):
            raise UsageError(f"{path}: no callable '{factory}' in it")
        module = make()
    except UsageError:
        raise
    except Exception as err:  # the customer's code raises what it raises
        raise UsageError(
            f"{path}:{factory}() failed: {type(err).__name__}: {one_line(err)}"
        ) from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    if not isinstance(module, torch.nn.Module):
        raise UsageError(
            f"{path}:{factory}() returned {type(module).__name__}, not a torch.nn.Module"
        )
    if getattr(module, "_orig_mod", module).training:
        raise UsageError(
            f"{path}:{factory}() returned a module in training mode; return model.eval() "
            "(dropout and batch-norm statistics would make its outputs and time not inference)"
        )
    return (
        module,
        f"{path.name}:{factory}() -> {type(getattr(module, '_orig_mod', module)).__name__}",
    )


def _compiled_by_factory(module: Any) -> str | None:
    import torch

    if isinstance(module, torch._dynamo.eval_frame.OptimizedModule):
        return "torch.compile"
    return None


def _forward_names(module: Any) -> list[str] | None:
    """The forward's positional parameter names (matched to the feeds by name), or None
    for *args (then the feeds go positionally, in the artifact's input order)."""
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return [p.name for p in params if p.kind in kinds]


class _CheckedOnce:
    """`ExportedProgram.module()` with torch's input check run once per input signature
    (shapes, dtypes), then its `forward` called directly.  The check is interpreted Python
    over sympy range constraints, a fixed ~130 µs a call that the original nn.Module never
    pays; the module's other hooks only register nn.Module-typed inputs with pytree (none
    here: a .pt2 read by `pt2_archive` has no example inputs) yet still cost 3-8% of a
    1 ms model through `nn.Module.__call__`'s hooked path."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.seen: set[tuple[object, ...]] = set()  # input signatures torch has checked

    def __call__(self, *args: Any) -> Any:
        sig = tuple((tuple(a.shape), a.dtype) for a in args)
        if sig in self.seen:
            return self.module.forward(*args)
        out = self.module(*args)  # the hooked call: torch's own input check
        self.seen.add(sig)
        return out


def _torch_run(
    module: Any, names: list[str] | None, s: Mapping[str, str]
) -> Callable[[Feeds], Outputs]:
    import torch

    renamed = s["outputs"].split(",") if s.get("outputs") else None

    def run(feeds: Feeds) -> Outputs:
        by_name = names is not None and set(feeds) <= set(names)
        order = [n for n in names if n in feeds] if by_name else list(feeds)  # type: ignore[union-attr]
        args = [torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in order]
        with torch.inference_mode():
            result = module(*args)
        return torch_outputs(result, renamed)

    return run


def torch_program(path: Path) -> tuple[Any, list[str]]:
    """The eager module of a .pt2 ExportedProgram (read safely) and its user input names."""
    from torch.export.graph_signature import InputKind

    from luminal.compiler.frontend import pt2_archive

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = pt2_archive.read_exported(path)
        names = [
            s.arg.name for s in ep.graph_signature.input_specs if s.kind is InputKind.USER_INPUT
        ]
        return ep.module(), names


def torch_outputs(result: Any, names: Sequence[str] | None = None) -> Outputs:
    """Outputs named as the torch frontend names them (output0, output1, ...), by a
    mapping's own keys, or by `names` (`--baseline-opt outputs=y,z`) in order."""
    if isinstance(result, Mapping):
        items = [(str(k), v) for k, v in result.items()]
    else:
        flat = result if isinstance(result, (tuple, list)) else (result,)
        items = [(f"output{k}", t) for k, t in enumerate(flat)]
    if names is not None:
        if len(names) != len(items):
            raise UsageError(
                f"outputs={','.join(names)} names {len(names)} outputs; the module returns {len(items)}"
            )
        items = [(n, t) for n, (_, t) in zip(names, items, strict=True)]
    return {k: t.detach().numpy() for k, t in items}
