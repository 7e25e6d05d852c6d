"""Running a generated `model.py`: on the GPU it was built for, or in Triton's interpreter.

    where      a GPU of the artifact's kind (NVIDIA for cuda, AMD for rocm, through
               PyTorch's CUDA/HIP runtime); or, with TRITON_INTERPRET=1, the CPU
    buffers    static tensors made once: the arena (uint8), the weights (uint8, copied
               to the device once), one per input and output, and the error flag
    warm-up    the first launch compiles every kernel (Triton caches them on disk);
               done at load on a GPU, on a side stream, so load fails, not the first
               request, when a kernel does not compile
    replay     then the whole model is captured once as a CUDA/HIP graph and each run
               is: copy inputs into the static input buffers, replay, read outputs.
               No Python per kernel, no allocation, one launch.

Runs on one executable are serialized by a lock: its buffers are shared.
"""

from __future__ import annotations

import linecache
import threading
import time
import types
from collections.abc import Mapping
from typing import Any

import numpy as np

from luminal.compiler.backends.triton.launch import interpreter_launch
from luminal.compiler.backends.triton.texpr import TORCH_TYPES
from luminal.compiler.ir import DType, TensorSpec
from luminal.compiler.ir.graph import check_feeds
from luminal.errors import ArtifactIncompatible, UsageError, one_line

VENDOR = {"cuda": "NVIDIA", "rocm": "AMD"}
INTERPRET_HINT = "set TRITON_INTERPRET=1 to run it on the CPU in Triton's interpreter"


def device_for(target: Mapping[str, Any]) -> str:
    """ "cpu" in interpreter mode, else the torch device of a GPU of the target's kind;
    ArtifactIncompatible with one line when there is none (or no triton, or no torch)."""
    kind, arch = target.get("kind"), target.get("arch", "?")
    built = f"built for {kind} {arch}"
    try:
        import torch
        import triton
    except ImportError as err:
        raise ArtifactIncompatible(
            f"{built}; it needs torch and triton, which are not installed here ({err.name}): "
            "pip install 'luminal[gpu,torch]'"
        ) from None
    if triton.knobs.runtime.interpret:
        return "cpu"
    hip = getattr(torch.version, "hip", None) is not None
    if not torch.cuda.is_available() or hip != (kind == "rocm"):
        raise ArtifactIncompatible(
            f"{built}; no {VENDOR.get(str(kind), kind)} GPU found here ({INTERPRET_HINT})"
        )
    return f"cuda:{torch.cuda.current_device()}"


def gpu_arch(device: str) -> str:
    """The present GPU's architecture as the target records it: sm_90, gfx942."""
    import torch

    props = torch.cuda.get_device_properties(device)
    if getattr(torch.version, "hip", None) is not None:
        return str(getattr(props, "gcnArchName", "gfx")).split(":")[0]
    return f"sm_{props.major}{props.minor}"


def load_module(source: str, tag: str) -> types.ModuleType:
    """Execute generated source as a module.  `triton.jit` reads each kernel's source
    with `inspect`, so the text is registered with `linecache` under a unique name."""
    filename = f"<luminal-triton-{tag}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(f"luminal_triton_{tag}")
    module.__file__ = filename
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


class TritonExecutable:
    """A loaded model: its module, its static buffers on one device, and (on a GPU,
    after `prepare`) the captured graph that replays it."""

    def __init__(
        self,
        module: types.ModuleType,
        weights: bytes,
        target: Mapping[str, Any],
        device: str,
        launch: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        """`launch`: block sizes per kernel; None takes the module's own on a GPU and
        `interpreter_launch` (blocks as large as the extents) in the interpreter."""
        import torch

        self.module = module
        self.target = dict(target)
        self.device = torch.device(device)
        self.on_gpu = self.device.type == "cuda"
        self.inputs = tuple(TensorSpec(n, tuple(s), DType(d)) for n, s, d in module.INPUTS)
        self.outputs = tuple(TensorSpec(n, tuple(s), DType(d)) for n, s, d in module.OUTPUTS)
        if launch is None:
            gpu = self.on_gpu
            launch = module.LAUNCH if gpu else interpreter_launch(module.LAUNCH, module.EXTENTS)
        self.launch = launch
        dev = self.device
        self.arena = torch.empty(module.ARENA_BYTES, dtype=torch.uint8, device=dev)
        host = torch.from_numpy(np.frombuffer(weights, np.uint8).copy())
        self.weights = host.to(dev)
        self.ins = [torch.empty(_numel(s), dtype=_torch(s.dtype), device=dev) for s in self.inputs]
        self.outs = [
            torch.empty(_numel(s), dtype=_torch(s.dtype), device=dev) for s in self.outputs
        ]
        self.err = torch.zeros(1, dtype=torch.int32, device=dev)
        self.graph: Any = None  # torch.cuda.CUDAGraph once captured
        self.graph_error: str | None = None  # why replay is off, when it is
        self.lock = threading.Lock()

    # ---- one inference -------------------------------------------------------------------
    def _launch(self) -> None:
        self.err.zero_()
        self.module.run(self.arena, self.weights, self.ins, self.outs, self.err, self.launch)

    def _execute(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self._launch()

    def prepare(self, cuda_graph: bool) -> None:
        """Compile every kernel (a warm-up run on zeros, on a side stream), then capture
        the model as one graph.  A GPU whose architecture differs from the build's still
        runs the code (Triton compiles it here) unless a kernel does not fit it."""
        if not self.on_gpu:
            return
        import torch

        for t in self.ins:
            t.zero_()
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        try:
            with torch.cuda.stream(stream):
                self._launch()
        except Exception as err:
            here = gpu_arch(str(self.device))
            raise ArtifactIncompatible(
                f"built for {self.target.get('kind')} {self.target.get('arch')}; its kernels do "
                f"not compile for this {here} GPU ({one_line(err)}); recompile it here"
            ) from None
        torch.cuda.current_stream(self.device).wait_stream(stream)
        torch.cuda.synchronize(self.device)
        if not cuda_graph:
            self.graph_error = "disabled at compile time"
            return
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self._launch()
            self.graph = graph
        except Exception as err:  # replay is an optimization: launch kernels one by one
            self.graph_error = one_line(err)
            torch.cuda.synchronize(self.device)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays = check_feeds(self.inputs, feeds)
        with self.lock:
            self._stage(arrays)
            self._execute()
            failed = int(self.err.item())  # waits for the device
            result = {s.name: _numpy(t, s) for s, t in zip(self.outputs, self.outs, strict=True)}
        if failed:
            raise UsageError(
                "an index input is out of range for the tensor it indexes (a gather or scatter)"
            )
        return result

    def _stage(self, arrays: list[np.ndarray]) -> None:
        for t, a in zip(self.ins, arrays, strict=True):
            t.copy_(_tensor(a).reshape(-1), non_blocking=False)

    def time(self, feeds: Mapping[str, np.ndarray], repeats: int, warmup: int = 1) -> list[float]:
        """Seconds per run of the model itself, inputs staged once: CUDA events around
        each replay on a GPU, the wall clock in the interpreter."""
        arrays = check_feeds(self.inputs, feeds)
        with self.lock:
            self._stage(arrays)
            for _ in range(warmup):
                self._execute()
            if not self.on_gpu:
                out = []
                for _ in range(max(repeats, 0)):
                    start = time.perf_counter()
                    self._execute()
                    out.append(time.perf_counter() - start)
                return out
            import torch

            stream = torch.cuda.current_stream(self.device)
            pairs = []
            for _ in range(max(repeats, 0)):
                begin, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                begin.record(stream)
                self._execute()
                end.record(stream)
                pairs.append((begin, end))
            torch.cuda.synchronize(self.device)
            return [b.elapsed_time(e) / 1e3 for b, e in pairs]


def _numel(s: TensorSpec) -> int:
    return int(np.prod(s.shape, dtype=np.int64))


def _torch(dtype: DType) -> Any:
    import torch

    return getattr(torch, TORCH_TYPES[dtype].removeprefix("torch."))


def _tensor(a: np.ndarray) -> Any:
    import torch

    if a.dtype == DType.BF16.np:  # numpy has no bfloat16 torch knows: move the bits
        return torch.from_numpy(np.ascontiguousarray(a).view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _numpy(t: Any, s: TensorSpec) -> np.ndarray:
    import torch

    host = t.detach().to("cpu")
    if s.dtype is DType.BF16:
        return host.view(torch.uint16).numpy().view(DType.BF16.np).reshape(s.shape).copy()
    return host.numpy().reshape(s.shape).copy()
