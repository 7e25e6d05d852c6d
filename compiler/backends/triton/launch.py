"""Launches: which buffers a kernel gets, and how big a block each Triton program handles.

Every kernel's block sizes are data in the generated module (`LAUNCH`), beside the extent
each block tiles (`EXTENTS`), so one compiled program can be launched three ways:

- on the GPU it was compiled for, with the sizes chosen here (the search overrides a
  contraction's tiles through its `Variant`: mr -> BLOCK_M, nr -> BLOCK_N, kc -> BLOCK_K);
- in Triton's CPU interpreter (`TRITON_INTERPRET=1`), where every program instance costs
  about a millisecond of Python, with `interpreter_launch`: blocks as large as the
  extents allow, so a kernel runs as a handful of big numpy operations;
- by a tuner trying other sizes without generating code again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from luminal.compiler.ir import DType
from luminal.compiler.schedule import Place
from luminal.compiler.schedule.variant import Variant

#: Triton's `tl.dot` needs every tile dimension to be at least this.
DOT_MIN = 16


@dataclass(frozen=True)
class Buf:
    """A buffer a launch reads or writes: where it lives, its element type and size."""

    place: Place
    dtype: DType
    numel: int


Arg = Buf | str  # a buffer, "err", or the name of a host temporary (a library GEMM result)


@dataclass(frozen=True)
class Launch:
    fn: str
    grid: tuple[str, ...]  # expressions of L, the kernel's launch parameters
    args: tuple[Arg, ...]
    params: dict[str, int]
    extents: dict[str, int]  # what each block parameter tiles


@dataclass(frozen=True)
class KernelCode:
    source: str
    launches: tuple[Launch, ...]
    host: tuple[tuple[str, tuple[Buf, ...]], ...] = ()  # statements with {0}, {1} buffers
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class TritonOptions:
    """Code generation choices for one GPU kind; `for_kind` gives each kind's defaults."""

    kind: str = "cuda"  # "cuda" | "rocm"
    block: int = 1024  # elementwise: output elements per program
    reduce_block: int = 1024  # reduce: reduced elements per loop step, at most
    reduce_tile: int = 4096  # reduce: output rows x reduced elements per program, at most
    block_m: int = 64  # contraction tile rows
    block_n: int = 64  # contraction tile columns
    block_k: int = 32  # contraction reduction step
    num_warps: int = 4
    num_stages: int = 3  # software pipelining depth of contraction loops
    input_precision: str = "ieee"  # f32 tl.dot: "ieee" (exact f32 products) | "tf32"
    cuda_graph: bool = True  # replay the whole model as one CUDA/HIP graph
    fp_fusion: bool = False  # let Triton contract a*b+c into an FMA (the CPU backend does not)
    variants: Mapping[str, Variant] = field(default_factory=dict)  # kernel name -> choice

    @staticmethod
    def for_kind(kind: str, **overrides: object) -> TritonOptions:
        """NVIDIA: 64x64x32 tiles, 3 pipeline stages.  AMD (CDNA): a deeper K step and
        two stages, which is what Triton's AMD stream pipeliner is built around."""
        base: dict[str, object] = {"kind": kind}
        if kind == "rocm":
            base.update(block_k=64, num_stages=2)
        base.update(overrides)
        return TritonOptions(**base)  # type: ignore[arg-type]


def pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def tile(requested: int | None, default: int) -> int:
    """A tile dimension for tl.dot: a power of two, at least DOT_MIN.  A variant's size
    that is neither (a CPU register tile such as 6) is rounded up, not refused."""
    return max(DOT_MIN, pow2(requested if requested else default))


def fit(extent: int, cap: int) -> int:
    """A block for `extent`: at most `cap`, and one that divides the extent when a power
    of two >= 128 does.  Without a tail the kernel skips clamping its indices, which
    keeps them visibly contiguous, so Triton emits vector loads (768 -> 256, not 1024)."""
    block = min(pow2(extent), pow2(cap))
    divisor = extent & -extent  # the largest power of two dividing it
    if extent % block and 128 <= divisor:
        block = min(divisor, block)
    return block


def elementwise(numel: int, opts: TritonOptions) -> dict[str, int]:
    return {"BLOCK": fit(numel, opts.block), "num_warps": opts.num_warps}


def reduce(rows: int, reduced: int, opts: TritonOptions) -> dict[str, int]:
    """One program reduces BLOCK_O output rows, BLOCK_R elements of each per step: long
    rows (softmax, norms) get a wide step and few rows; short rows are packed together."""
    block_r = fit(reduced, opts.reduce_block)
    block_o = max(1, min(pow2(rows), pow2(opts.reduce_tile) // block_r))
    warps = 8 if block_o * block_r >= 4096 else opts.num_warps
    return {"BLOCK_O": block_o, "BLOCK_R": block_r, "num_warps": warps}


def contraction(m: int, n: int, k: int, opts: TritonOptions, v: Variant) -> dict[str, int]:
    """Tiles from the variant when it names them, else the options' defaults shrunk to
    the problem (an 8-row matmul gets 16-row tiles, not 64)."""
    bm = tile(v.mr, opts.block_m) if v.mr else min(tile(None, opts.block_m), tile(m, DOT_MIN))
    bn = tile(v.nr, opts.block_n) if v.nr else min(tile(None, opts.block_n), tile(n, DOT_MIN))
    bk = tile(v.kc, opts.block_k) if v.kc else min(tile(None, opts.block_k), tile(k, DOT_MIN))
    warps = 8 if bm * bn >= 128 * 128 else opts.num_warps
    return {
        "BLOCK_M": bm,
        "BLOCK_N": bn,
        "BLOCK_K": bk,
        "num_warps": warps,
        "num_stages": opts.num_stages,
    }


#: Interpreter caps: the largest block per parameter (elements of one numpy operand).
INTERPRETER_CAPS = {
    "BLOCK": 1 << 20,
    "BLOCK_R": 1 << 14,
    "BLOCK_M": 1024,  # Triton refuses blocks over 2^20 elements: M x N, M x K, K x N
    "BLOCK_N": 1024,
    "BLOCK_K": 1024,
}


def interpreter_launch(
    launch: Mapping[str, Mapping[str, int]], extents: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Blocks that cover each extent in as few programs as the caps allow."""
    out: dict[str, dict[str, int]] = {}
    for name, params in launch.items():
        ext = extents.get(name, {})
        new = dict(params)
        for p, size in ext.items():
            if p == "BLOCK_O":
                continue
            new[p] = min(pow2(size), INTERPRETER_CAPS[p])
            if p in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
                new[p] = max(DOT_MIN, new[p])
        if "BLOCK_O" in ext:
            budget = max(1, INTERPRETER_CAPS["BLOCK"] // new["BLOCK_R"])  # both powers of 2
            new["BLOCK_O"] = min(pow2(ext["BLOCK_O"]), budget)
        out[name] = new
    return out
