"""GPU backends for NVIDIA (`cuda`) and AMD (`rocm`): the schedule as Triton kernels.

    texpr     Triton spellings of dtypes, literals, ops and index expressions
    body      values at a block of points (views, elementwise ops, gathers inlined)
    kernels   one schedule kernel -> @triton.jit source and its launches
    tiles     contractions: tl.dot tiles, or a library GEMM plus the epilogue
    launch    block sizes per kernel (GPU defaults, variants, interpreter sizes)
    codegen   the whole module: kernels, buffer views, `run`
    runtime   loading it: device buffers, warm-up, CUDA/HIP graph replay, interpreter
    backend   the Backend protocol objects the registry names "cuda" and "rocm"

See docs/gpu.md.
"""

from luminal.compiler.backends.triton.backend import (
    CUDA_BACKEND,
    DEFAULT_ARCH,
    ROCM_BACKEND,
    CudaBackend,
    RocmBackend,
    TritonBackend,
)
from luminal.compiler.backends.triton.codegen import generate
from luminal.compiler.backends.triton.launch import TritonOptions

__all__ = [
    "CUDA_BACKEND",
    "DEFAULT_ARCH",
    "ROCM_BACKEND",
    "CudaBackend",
    "RocmBackend",
    "TritonBackend",
    "TritonOptions",
    "generate",
]
