"""Tiled contractions: tl.dot over BLOCK_M x BLOCK_N x BLOCK_K tiles, or a library GEMM.

The schedule gives a contraction as loops and affine offsets (`ContractionLoops`).  The
loops fall into four groups by which operand moves along them:

    B  output loops both operands move along (a batch): grid axis 2, one per program
    M  output loops only X moves along (rows of a tile; also loops neither moves along)
    N  output loops only Y moves along (columns of a tile)
    K  reduced loops (the dot product)

Each group is flattened to one index (`m`, `n`, `k`, `b`) and its loop variables are
recovered by floor division and modulo, which `symbolic` simplifies away where the
layout allows.  X's offset then splits into an M part, a K part and a B part, so a tile
of X is `px + xm[:, None] + xk[None, :]`: two vectors of offsets, whatever the view.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from luminal.compiler.backends.triton import launch as lp
from luminal.compiler.backends.triton import texpr
from luminal.compiler.backends.triton.launch import Buf, KernelCode, Launch
from luminal.compiler.ir import DType
from luminal.compiler.schedule.indexing import unflatten
from luminal.compiler.schedule.symbolic import Lin, Var

if TYPE_CHECKING:
    from luminal.compiler.backends.triton.kernels import KernelWriter


def _part(lin: Lin, group: list[Var], sub: dict[Var, Lin]) -> Lin:
    """The terms of `lin` over `group`'s loop variables, in the group's flat index."""
    return Lin(tuple((a, c) for a, c in lin.terms if a in group)).substitute(sub)


def _collapse(lin: Lin, group: list[Var]) -> int | None:
    """The one stride a group of loops has in `lin` when its flat index addresses it as
    one strided axis (row-major, like a matrix dimension); None when it does not."""
    if not group:
        return 0
    for a, b in itertools.pairwise(group):
        if lin.coeff(a) != lin.coeff(b) * b.size:
            return None
    return lin.coeff(group[-1])


def write_contraction(w: KernelWriter) -> KernelCode:
    k, g = w.k, w.g
    plan = k.contraction
    assert plan is not None
    red = g.nodes[k.reduction if k.reduction is not None else k.node]
    cl = plan.loops
    (xa, xo), (ya, yo) = cl.x, cl.y
    outs = [v for v in cl.loops if v not in cl.reduced]
    groups = {
        "n": [v for v in outs if xo.coeff(v) == 0 and yo.coeff(v) != 0],
        "b": [v for v in outs if xo.coeff(v) != 0 and yo.coeff(v) != 0],
        "k": [v for v in cl.loops if v in cl.reduced],
    }
    groups["m"] = [v for v in outs if v not in groups["n"] and v not in groups["b"]]
    size = {name: math.prod(v.size for v in grp) for name, grp in groups.items()}
    sub: dict[Var, Lin] = {}
    for name, grp in groups.items():
        flat = Lin.of(Var(name, size[name]))
        sub.update(zip(grp, unflatten(flat, tuple(v.size for v in grp)), strict=True))
    M, N, K, B = size["m"], size["n"], size["k"], size["b"]
    if M == 0 or N == 0:
        return KernelCode(f"# {k.name}: empty output, nothing to launch\n", ())

    def vec(lin: Lin, name: str, block: str) -> str:
        part = _part(lin, groups[name], sub)
        if not part.terms:
            return f"tl.zeros([{block}], {w.idx_type})"
        return texpr.index(part, {name: name})

    def scalar(lin: Lin) -> str:
        """The batch part and constant of an offset, as ` + expr` (empty when 0)."""
        part = _part(lin, groups["b"], sub) + lin.const
        return f" + {texpr.index(part, {'b': 'b'})}" if part.terms or part.const else ""

    blas = _blas_views(xo, yo, groups) if w.v.impl == "blas" else None
    notes = ()
    if w.v.impl == "blas" and blas is None:
        notes = (f"{k.name}: operands are not plain strided matrices; generated tiles used",)
    acc_t = DType.F64 if red.dtype is DType.F64 else DType.F32
    lines = [
        f"m = {w.pid(0)} * BLOCK_M + tl.arange(0, BLOCK_M)",
        f"n = {w.pid(1)} * BLOCK_N + tl.arange(0, BLOCK_N)",
        f"b = {w.pid(2)}",
        f"live = (m < {M})[:, None] & (n < {N})[None, :]",
        f"if {M} % BLOCK_M != 0:",
        f"    m = tl.minimum(m, {M - 1})",
        f"if {N} % BLOCK_N != 0:",
        f"    n = tl.minimum(n, {N - 1})",
    ]
    host: tuple[tuple[str, tuple], ...] = ()
    if blas is not None:
        w.params["c"] = f"c_{k.name}"
        (xs, xst, xoff), (ys, yst, yoff) = blas
        host = (
            (
                f"c_{k.name} = torch.matmul(_strided({{0}}, {xs}, {xst}, {xoff}), "
                f"_strided({{1}}, {ys}, {yst}, {yoff}))",
                (_buf(w, xa), _buf(w, ya)),
            ),
        )
        lines.append(
            f"acc = tl.load(c + b * {M * N} + m[:, None] * {N} + n[None, :])"
            f".to({texpr.tltype(acc_t)})"
        )
    else:
        px, py = w.pointer(xa), w.pointer(ya)
        dt = w.s.dtype(xa)
        if dt is DType.F32:
            how = f', input_precision="{w.o.input_precision}"'
        elif dt is DType.F64:
            how = ', input_precision="ieee", out_dtype=tl.float64'
        else:
            how = ""
        # tl.dot takes no i32 operands (an integer contraction: ConvInteger, QLinear ops):
        # a broadcast product summed over the K tile instead, exact in i32; operands
        # stored as i16 (`ir/narrow.py`) widen first, so their products do not wrap
        narrow = red.dtype not in (dt, w.s.dtype(ya))
        wide = f".to({texpr.tltype(red.dtype)})" if narrow else ""
        step = (
            f"    acc += tl.sum(xt[:, :, None]{wide} * yt[None, :, :]{wide}, axis=1)"
            if dt.is_int
            else f"    acc = tl.dot(xt, yt, acc{how})"
        )
        lines += [
            f"xrow = {px} + ({vec(xo, 'm', 'BLOCK_M')}{scalar(xo)})[:, None]",
            f"ycol = {py} + ({vec(yo, 'n', 'BLOCK_N')}{scalar(yo)})[None, :]",
            f"acc = tl.zeros([BLOCK_M, BLOCK_N], {texpr.tltype(acc_t)})",
            f"for k0 in range(0, {K}, BLOCK_K):",
            f"    k = k0 + tl.arange(0, BLOCK_K){'.to(tl.int64)' if w.idx_type == 'tl.int64' else ''}",
            f"    if {K} % BLOCK_K == 0:",
            f"        xt = tl.load(xrow + ({vec(xo, 'k', 'BLOCK_K')})[None, :])",
            f"        yt = tl.load(ycol + ({vec(yo, 'k', 'BLOCK_K')})[:, None])",
            "    else:  # the last step: lanes past K load 0 (their index clamped in bounds)",
            f"        k_live = k < {K}",
            f"        k = tl.minimum(k, {max(K - 1, 0)})",
            f"        xt = tl.load(xrow + ({vec(xo, 'k', 'BLOCK_K')})[None, :], mask=k_live[None, :], other=0)",
            f"        yt = tl.load(ycol + ({vec(yo, 'k', 'BLOCK_K')})[:, None], mask=k_live[:, None], other=0)",
            step,
        ]
    value = "acc" if acc_t is red.dtype else f"acc.to({texpr.tltype(red.dtype)})"
    if k.reduction is not None:
        lines += ["mi = m[:, None]", "ni = n[None, :]"]
        flat = cl.out.substitute(sub)
        value = w.epilogue(lines, flat, value, {"m": "mi", "n": "ni", "b": "b"})
    # The epilogue may read the tile at [1, BLOCK_N] (a bias); the pointer is full size.
    off = f"({vec(cl.out, 'm', 'BLOCK_M')})[:, None] + ({vec(cl.out, 'n', 'BLOCK_N')})[None, :]{scalar(cl.out)}"
    lines.append(f"tl.store(out + {off}, {value}, mask=live)")
    dest = w.dest()
    fn = w.function(k.name, ["BLOCK_M", "BLOCK_N", "BLOCK_K"], lines, dest)
    grid = (f"triton.cdiv({M}, L['BLOCK_M'])", f"triton.cdiv({N}, L['BLOCK_N'])", str(B))
    params = lp.contraction(M, N, K, w.o, w.v)
    extents = {"BLOCK_M": M, "BLOCK_N": N}
    if blas is None:
        extents["BLOCK_K"] = K
    run = Launch(k.name, grid, w.args(dest), params, extents)
    return KernelCode(fn, (run,), host, notes)


def _buf(w: KernelWriter, i: int) -> Buf:
    return Buf(w.s.homes[i], w.s.dtype(i), w.numel(i))


def _blas_views(
    xo: Lin, yo: Lin, groups: dict[str, list[Var]]
) -> tuple[tuple[tuple[int, ...], tuple[int, ...], int], ...] | None:
    """(size, stride, offset) of X as [*B, *M, K] and of Y as [*B, 1.., K, N], so that
    torch.matmul's result is [*B, *M, N] in row-major order of the flat (b, m, n); None
    when K (or N) is not one strided axis of the operands, or a stride is negative."""
    kx, ky, ny = _collapse(xo, groups["k"]), _collapse(yo, groups["k"]), _collapse(yo, groups["n"])
    if kx is None or ky is None or ny is None:
        return None
    if any(c < 0 for _, c in xo.terms + yo.terms) or xo.const < 0 or yo.const < 0:
        return None
    kk = math.prod(v.size for v in groups["k"])
    nn = math.prod(v.size for v in groups["n"])
    bs = tuple(v.size for v in groups["b"])
    ms = tuple(v.size for v in groups["m"]) or (1,)
    xm = tuple(xo.coeff(v) for v in groups["m"]) or (0,)
    ones = (1,) * (len(ms) - 1)
    x = ((*bs, *ms, kk), (*(xo.coeff(v) for v in groups["b"]), *xm, kx), xo.const)
    y = (
        (*bs, *ones, kk, nn),
        (*(yo.coeff(v) for v in groups["b"]), *(0,) * len(ones), ky, ny),
        yo.const,
    )
    return x, y
