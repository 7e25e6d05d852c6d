"""The library alternative for contractions: OpenBLAS `sgemm`/`dgemm` from generated C.

A contraction is legal for BLAS when it is a batch of plain matrix products: its rows,
its reduction and its columns each have one constant stride in both operands and the
output (`gemm_layout`), with unit stride along one dimension of each matrix; a fused
epilogue must keep the contraction's dtype, since it then runs in place over the output
(one pass after the products).

Threads: the kernel splits the columns (and the batch) across the OpenMP threads itself
and OpenBLAS runs single-threaded inside each, so one pool of threads ever runs, the same
one every other kernel uses.  OpenBLAS's own pool would compete with it: its workers
busy-wait long after a call (2^28 cycles by default), as OpenMP's do, and on 2 cores either
pool spinning halves the other's speed.  The pthreads build exports no per-thread setting
(`set_num_threads_local` is OpenMP-build only), so the kernel sets this OpenBLAS's global
count to 1; numpy and scipy carry their own OpenBLAS copies and are not affected.

The library is `scipy-openblas32` (symbols prefixed `scipy_`, 32-bit integers).  The
generated library is linked against it with an rpath to its folder; `describe()` is what
the manifest records about it, and `load()` opens it before the model's library so a
machine without it fails with a clear `ArtifactIncompatible`.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from luminal.compiler.backends.cpu.gemm_layout import GemmLayout
from luminal.compiler.ir import DType
from luminal.compiler.schedule import Kernel, Schedule
from luminal.errors import ArtifactIncompatible, CompilerError

if TYPE_CHECKING:
    from luminal.compiler.backends.cpu.codegen import _KernelWriter

PACKAGE = "scipy_openblas32"
#: Written into the C of every kernel that calls BLAS: `toolchain.build_shared_library`
#: links OpenBLAS exactly when a source holds it, whoever assembled the source.
MARKER = "/* luminal: links scipy_openblas32 */"
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112

PROTOTYPES = """\
void scipy_cblas_sgemm(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
void scipy_cblas_dgemm(int, int, int, int, int, int, double, const double *, int, const double *, int, double, double *, int);
void scipy_openblas_set_num_threads(int);
int scipy_openblas_get_num_threads(void);
"""


@dataclass(frozen=True)
class Library:
    path: Path
    version: str

    def to_json(self) -> dict[str, str]:
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()
        return {
            "package": PACKAGE,
            "version": self.version,
            "path": str(self.path),
            "sha256": digest,
        }


@functools.lru_cache(maxsize=1)
def find() -> Library | None:
    """The installed scipy-openblas32 library, or None."""
    try:
        import scipy_openblas32 as pkg
    except ImportError:
        return None
    path = Path(pkg.get_lib_dir()) / f"lib{pkg.get_library()}.so"
    if not path.is_file():
        return None
    return Library(path, str(getattr(pkg, "__version__", "unknown")))


def available() -> bool:
    return find() is not None


def link_flags() -> tuple[str, ...]:
    lib = find()
    if lib is None:
        raise CompilerError(
            "a kernel was asked to call OpenBLAS but scipy-openblas32 is not installed "
            "(pip install scipy-openblas32)"
        )
    folder = str(lib.path.parent)
    return (f"-L{folder}", f"-l{lib.path.stem[3:]}", f"-Wl,-rpath,{folder}")


def describe() -> dict[str, str]:
    """The manifest's record of the BLAS library the artifact was linked against."""
    lib = find()
    if lib is None:
        raise CompilerError("scipy-openblas32 is not installed")
    return lib.to_json()


def record(source: str) -> dict[str, dict[str, str]]:
    """`{"blas": describe()}` for the manifest's target when `source` calls BLAS, else {}."""
    return {"blas": describe()} if MARKER in source else {}


def load(record: dict[str, str], artifact: str) -> None:
    """Open the BLAS library an artifact needs (its soname then resolves the model's
    dependency) or raise ArtifactIncompatible saying what to install."""
    lib = find()
    if lib is None:
        raise ArtifactIncompatible(
            f"{artifact}: compiled to call OpenBLAS ({record.get('package', PACKAGE)} "
            f"{record.get('version', '?')}), which is not installed here; "
            "pip install scipy-openblas32, or recompile without BLAS kernels"
        )
    try:
        ctypes.CDLL(str(lib.path))
    except OSError as err:
        raise ArtifactIncompatible(f"{artifact}: cannot open {lib.path} ({err})") from None


# ---- legality ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Matrix:
    """A strided matrix operand: rows x cols with element strides; C reads it as
    row-major (trans False, ld = row stride) or as the transpose (ld = col stride)."""

    rows: int
    cols: int
    srow: int
    scol: int

    def form(self) -> tuple[bool, int] | None:
        """(transposed, leading dimension) for BLAS, or None when not a plain matrix."""
        if self.scol == 1 or self.cols == 1:
            ld = self.srow if self.rows > 1 else max(self.cols, 1)
            if ld >= max(self.cols, 1):
                return False, ld
        if self.srow == 1 or self.rows == 1:
            ld = self.scol if self.cols > 1 else max(self.rows, 1)
            if ld >= max(self.rows, 1):
                return True, ld
        return None


@dataclass(frozen=True)
class _Call:
    """One GEMM per batch index, C[m, n] = sum_k A[m, k] B[k, n].  `swap`: the output is
    column-major, so the call computes its transpose, out^T = Y^T X^T.  The call's
    columns are split across threads: `b_col` and `c_col` step B and C per column."""

    m: int
    n: int
    k: int
    a: tuple[bool, int]
    b: tuple[bool, int]
    ldc: int
    swap: bool
    b_col: int
    c_col: int


def _plan_call(lay: GemmLayout) -> _Call | None:
    (_, xoff), (_, yoff), out = lay.x, lay.y, lay.out
    sxm, sxk = lay.rows.stride(xoff), lay.k.stride(xoff)
    sym = lay.rows.stride(yoff)
    syk, syn = lay.k.stride(yoff), yoff.coeff(lay.n)
    som, son = lay.rows.stride(out), out.coeff(lay.n)
    if sxm is None or sxk is None or syk is None or som is None or sym != 0:
        return None
    M, N, K = lay.rows.size, lay.n.size, lay.k.size
    if son == 1 or N == 1:
        a = _Matrix(M, K, sxm, sxk).form()
        b = _Matrix(K, N, syk, syn).form()
        ldc = som if M > 1 else N
        if a is None or b is None or ldc < N:
            return None
        return _Call(M, N, K, a, b, ldc, False, syn, son)
    if som == 1 or M == 1:
        a = _Matrix(N, K, syn, syk).form()
        b = _Matrix(K, M, sxk, sxm).form()
        ldc = son if N > 1 else M
        if a is None or b is None or ldc < M:
            return None
        return _Call(N, M, K, a, b, ldc, True, sxm, som)
    return None


def legal(sched: Schedule, kernel: Kernel) -> bool:
    p = kernel.contraction
    if p is None or not available():
        return False
    g = sched.graph
    red = g.nodes[kernel.reduction if kernel.reduction is not None else kernel.node]
    if red.dtype not in (DType.F32, DType.F64):
        return False
    if g.nodes[kernel.node].dtype is not red.dtype:
        return False
    if sched.dtype(p.loops.x[0]) is not red.dtype or sched.dtype(p.loops.y[0]) is not red.dtype:
        return False
    lay = GemmLayout.of(p)
    if lay.rows.size * lay.n.size * lay.k.size >= 2**31:
        return False
    return _plan_call(lay) is not None


# ---- code ------------------------------------------------------------------------------
def write(w: _KernelWriter, out: list[str]) -> None:
    p = w.k.contraction
    if p is None or not legal(w.s, w.k):
        raise CompilerError(f"kernel {w.k.name} cannot be computed by BLAS (not plain matrices)")
    lay = GemmLayout.of(p)
    call = _plan_call(lay)
    assert call is not None
    g = w.g
    red = g.nodes[w.k.reduction if w.k.reduction is not None else w.k.node]
    f64 = red.dtype is DType.F64
    t, fn = ("double", "scipy_cblas_dgemm") if f64 else ("float", "scipy_cblas_sgemm")
    (xb, xoff), (yb, yoff) = lay.x, lay.y
    px, py = w._pointer(xb), w._pointer(yb)
    xbase = lay.without(xoff, lay.rows, lay.k)
    ybase = lay.without(yoff, lay.k, lay.n)
    obase = lay.without(lay.out, lay.rows, lay.n)
    work = lay.batch.size * lay.rows.size * lay.n.size * lay.k.size
    parallel = w._parallel(work)
    cols = call.n  # the call's columns, split into one slice per thread
    out.append("    " + MARKER)
    out.append("    if (scipy_openblas_get_num_threads() != 1) scipy_openblas_set_num_threads(1);")
    cap = max(1, cols // 16)
    slices = f"(lum_threads() < {cap} ? lum_threads() : {cap})" if parallel else "1"
    out.append(f"    const int64_t slices = {slices};")
    out.append(f"    const int64_t per = ((({cols} + slices - 1) / slices) + 15) / 16 * 16;")
    if parallel:
        w.pool = (f"{lay.batch.size} * {slices}", "1")
        out.append("    for (int64_t t = lum_lo; t < lum_hi; t++) {")
    else:
        out.append(f"    for (int64_t t = 0; t < {lay.batch.size} * slices; t++) {{")
    i2 = "        "
    out.append(i2 + "const int64_t bi = t / slices, c0 = (t % slices) * per;")
    out.append(i2 + "(void)bi;")
    for v, e in lay.batch.unflatten("bi"):
        out.append(i2 + f"const int64_t {v.name} = {e};")
    out.append(i2 + f"if (c0 >= {cols}) continue;")
    out.append(i2 + f"const int cn = (int)({cols} - c0 < per ? {cols} - c0 : per);")
    xp, yp = f"{px} + ({xbase.c()})", f"{py} + ({ybase.c()})"
    a_ptr, b_ptr = (yp, xp) if call.swap else (xp, yp)
    b_ptr = f"{b_ptr} + c0 * {call.b_col}"
    c_ptr = f"out + ({obase.c()}) + c0 * {call.c_col}"
    ta = TRANS if call.a[0] else NO_TRANS
    tb = TRANS if call.b[0] else NO_TRANS
    one, zero = ("1.0", "0.0") if f64 else ("1.0f", "0.0f")
    out.append(
        i2 + f"{fn}({ROW_MAJOR}, {ta}, {tb}, {call.m}, cn, {call.k}, {one}, ({t} *)({a_ptr}), "
        f"{call.a[1]}, ({t} *)({b_ptr}), {call.b[1]}, {zero}, ({t} *)({c_ptr}), {call.ldc});"
    )
    if w.k.reduction is not None:
        _epilogue(w, out, lay, call, t)
    out.append("    }")


def _epilogue(w: _KernelWriter, out: list[str], lay: GemmLayout, call: _Call, t: str) -> None:
    """The fused epilogue over this slice's block of the output, in place over the
    products just written there (so it stays in cache, and no other slice touches it)."""
    if call.swap:  # the slice is of the output's rows
        rows, cols = ("c0", "c0 + cn"), ("0", str(lay.n.size))
    else:
        rows, cols = ("0", str(lay.rows.size)), ("c0", "c0 + cn")
    ind = "        "
    out.append(ind + f"for (int64_t r = {rows[0]}; r < {rows[1]}; r++) {{")
    for v, e in lay.rows.unflatten("r"):
        out.append(ind + f"    const int64_t {v.name} = {e};")
    out.append(ind + f"    for (int64_t c = {cols[0]}; c < {cols[1]}; c++) {{")
    out.append(ind + f"        const int64_t {lay.n.name} = c;")
    w._store(out, 4, lay.out, f"out[{lay.out.c()}]", t)
    out.append(ind + "    }")
    out.append(ind + "}")
