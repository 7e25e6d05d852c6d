"""Helpers for the Triton backend tests: compile, load in the interpreter, compare.

Import this only after TRITON_INTERPRET=1 is set (this folder's conftest does it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from luminal.compiler.artifact import Manifest, Memory, SourceModel
from luminal.compiler.backends.protocol import Built, Request
from luminal.compiler.backends.triton import CUDA_BACKEND, ROCM_BACKEND, TritonBackend
from luminal.compiler.backends.triton.runtime import TritonExecutable, load_module
from luminal.compiler.hardware import Device
from luminal.compiler.ir import Graph, interpreter
from luminal.compiler.schedule import Schedule, schedule
from luminal.compiler.schedule.variant import Variant

BACKENDS = {"cuda": CUDA_BACKEND, "rocm": ROCM_BACKEND}
RTOL, ATOL = 1e-3, 1e-4


def backend_with(kind: str, variants: Mapping[str, Variant] | None = None) -> TritonBackend:
    be = BACKENDS[kind]
    return replace(be, base=replace(be.base, variants=dict(variants or {})))


def build(
    be: TritonBackend,
    sched: Schedule,
    device: Device | None = None,
    variants: Mapping[str, Variant] | None = None,
) -> Built:
    """The backend's codegen and build stages, as the pipeline runs them."""
    request = Request(sched, device=device, variants=dict(variants or {}))
    return be.build(request, be.codegen(request))


def manifest(sched: Schedule, built: Built) -> Manifest:
    """The manifest the pipeline would write for `built`."""
    g = sched.graph
    return Manifest(
        "test",
        "test",
        dict(built.target),
        SourceModel("test", "test"),
        tuple(g.input_specs()),
        tuple(g.output_specs()),
        Memory(sched.arena_bytes, sched.intermediate_bytes, sched.weights_bytes),
    )


def load_interpreted(
    be: TritonBackend, graph: Graph, gpu_launch: bool = False
) -> tuple[TritonExecutable, str]:
    """Compile `graph` with `be` and load it in the interpreter.  gpu_launch: run with the
    block sizes a GPU would get (many programs, partial tiles, several K steps) instead
    of the interpreter's one-big-block sizes."""
    sched = schedule(graph)
    built = build(be, sched)
    if not gpu_launch:
        exe = be.load(manifest(sched, built), built.members)
        return exe, built.members["model.py"].decode()
    source = built.members["model.py"].decode()
    module = load_module(source, "test-" + hashlib.sha256(source.encode()).hexdigest()[:16])
    exe = TritonExecutable(module, built.members["weights.bin"], built.target, "cpu", module.LAUNCH)
    return exe, source


def assert_matches(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, w.dtype, g.shape, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=RTOL, atol=ATOL, err_msg=name
            )
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


def check(
    graph: Graph,
    feeds: Mapping[str, np.ndarray],
    kind: str = "cuda",
    variants: Mapping[str, Variant] | None = None,
    gpu_launch: bool = False,
) -> str:
    """Assert that the Triton program's outputs match the reference interpreter's;
    returns the generated model.py."""
    exe, source = load_interpreted(backend_with(kind, variants), graph, gpu_launch)
    assert_matches(exe.run(feeds), interpreter.run(graph, feeds))
    return source


#: IR dtype -> Triton's signature spelling of a pointer's element type.
SIGNATURE_TYPES = {
    "f64": "fp64",
    "f32": "fp32",
    "f16": "fp16",
    "bf16": "bf16",
    "bool": "i1",
}


def compile_for_gpu(graph: Graph, kind: str, arch: str) -> int:
    """Compile every kernel of `graph` with Triton's real compiler for a GPU that is not
    here (PTX and cubin for sm_*, an AMD code object for gfx*); returns how many.

    Only in a process that imported triton WITHOUT TRITON_INTERPRET: with it, triton's
    own library functions (tl.sum's combine, cdiv) are interpreter objects for good.
    `aot_in_subprocess` runs this in such a process."""
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from luminal.compiler.backends.triton import codegen
    from luminal.compiler.backends.triton.launch import Buf

    assert not triton.knobs.runtime.interpret, "compile_for_gpu needs a non-interpreter process"
    be = BACKENDS[kind]
    sched = schedule(graph)
    opts = be.options(Request(sched))
    codes = codegen.generate_kernels(sched, opts)
    source = codegen.generate(sched, opts, arch, codes)
    module = load_module(source, "aot-" + hashlib.sha256(source.encode()).hexdigest()[:16])
    if kind == "cuda":
        target = GPUTarget("cuda", int(arch.removeprefix("sm_")), 32)
    else:
        target = GPUTarget("hip", arch, 64)
    count = 0
    for code in codes:
        for run in code.launches:
            fn = getattr(module, run.fn)
            names = list(inspect.signature(fn.fn).parameters)
            sig: dict[str, str] = {}
            for name, arg in zip(names, run.args, strict=False):
                if isinstance(arg, Buf):
                    sig[name] = "*" + SIGNATURE_TYPES.get(arg.dtype.value, arg.dtype.value)
                else:
                    sig[name] = "*i32"  # the error flag
            blocks = {k: v for k, v in run.params.items() if k.startswith("BLOCK")}
            sig.update({k: "constexpr" for k in blocks})
            constexprs = {(names.index(k),): v for k, v in blocks.items()}
            aligned = {
                (i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if sig[n][0] == "*"
            }
            options = {
                "num_warps": run.params["num_warps"],
                "num_stages": run.params.get("num_stages", 2),
                "enable_fp_fusion": opts.fp_fusion,
            }
            triton.compile(ASTSource(fn, sig, constexprs, aligned), target=target, options=options)
            count += 1
    return count


def aot_in_subprocess(
    graphs: Mapping[str, Graph], targets: list[tuple[str, str]], tmp
) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """{f"{name} {kind} {arch}": kernels compiled} for every graph and target, from a
    fresh Python without TRITON_INTERPRET (see compile_for_gpu)."""
    import json
    import os
    import pickle
    import subprocess
    import sys
    from pathlib import Path

    data = Path(tmp) / "graphs.pkl"
    data.write_bytes(pickle.dumps((dict(graphs), targets)))
    program = (
        "import json, pickle, sys\n"
        "from tests.compiler.backends.triton.tritontest import compile_for_gpu\n"
        "graphs, targets = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "print(json.dumps({f'{n} {k} {a}': compile_for_gpu(g, k, a) for n, g in graphs.items() for k, a in targets}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "0"
    root = Path(__file__).resolve().parents[4]
    done = subprocess.run(
        [sys.executable, "-c", program, str(data)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
