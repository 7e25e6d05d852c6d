"""Contractions as the IR spells them: multiply expanded views, then SUM.

A matmul [.., M, K] x [.., K, N] becomes
    expand(A[.., M, K, 1]) * expand(B[.., 1, K, N]) -> SUM over K -> reshape.
The search recognises this shape again as a contraction kernel; the reference
interpreter evaluates it without materialising the expanded product.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose.windows import windows
from luminal.compiler.ir import GraphBuilder, Op, Value
from luminal.errors import GraphError


def matmul(b: GraphBuilder, a: Value, w: Value) -> Value:
    """numpy.matmul semantics, including 1-D operands and batch broadcasting."""
    if a.ndim == 0 or w.ndim == 0:
        raise GraphError("matmul operands must have at least one dimension")
    a2 = b.reshape(a, (1, *a.shape)) if a.ndim == 1 else a
    w2 = b.reshape(w, (*w.shape, 1)) if w.ndim == 1 else w
    (mm, k), (k2, n) = a2.shape[-2:], w2.shape[-2:]
    if k != k2:
        raise GraphError(f"matmul inner dimensions differ: {a.shape} @ {w.shape}")
    batch = m.broadcast_shapes(a2.shape[:-2], w2.shape[:-2])
    full = (*batch, mm, k, n)
    lhs = m.broadcast_to(b, b.reshape(a2, (*a2.shape, 1)), full)
    rhs = m.broadcast_to(b, b.reshape(w2, (*w2.shape[:-2], 1, k, n)), full)
    out = b.reduce(Op.SUM, b.binary(Op.MUL, lhs, rhs), [len(full) - 2])
    shape = [*batch, mm, n]
    if w.ndim == 1:
        shape.pop()
    if a.ndim == 1:
        shape.pop(-1 if w.ndim == 1 else -2)
    return b.reshape(out, shape)


def gemm(
    b: GraphBuilder,
    a: Value,
    w: Value,
    c: Value | None,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> Value:
    if trans_a:
        a = b.permute(a, (1, 0))
    if trans_b:
        w = b.permute(w, (1, 0))
    y = matmul(b, a, w)
    if alpha != 1.0:
        y = b.binary(Op.MUL, y, m.like(b, alpha, y))
    if c is not None:
        if beta != 1.0:
            c = m.mul(b, c, m.full(b, beta, c.shape, c.dtype))
        y = m.add(b, y, c)
    return y


def einsum(b: GraphBuilder, equation: str, operands: Sequence[Value]) -> Value:
    """Einstein summation: align every operand on one letter order, multiply, SUM."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise GraphError(f"einsum '{equation}' names {len(terms)} operands, got {len(operands)}")
    ell = _ellipsis_rank(terms, operands)
    ell_letters = "".join(chr(0x391 + k) for k in range(ell))  # Greek: never in the equation
    terms = [
        _expand_ellipsis(t, op.ndim, ell_letters) for t, op in zip(terms, operands, strict=True)
    ]
    if not arrow:
        counts = {c: "".join(terms).count(c) for c in set("".join(terms))}
        rhs = ell_letters + "".join(
            sorted(c for c, n in counts.items() if n == 1 and c not in ell_letters)
        )
    else:
        rhs = rhs.replace("...", ell_letters)
    sizes: dict[str, int] = {}
    for term, op in zip(terms, operands, strict=True):
        if not re.fullmatch(r"[a-zA-Z\u0391-\u03a9]*", term) or len(term) != op.ndim:
            raise GraphError(f"einsum term '{term}' does not fit operand shape {op.shape}")
        if len(set(term)) != len(term):
            raise GraphError(f"einsum term '{term}' repeats an index (diagonals are not supported)")
        for c, d in zip(term, op.shape, strict=True):
            if sizes.get(c, d) != d and d != 1 and sizes[c] != 1:
                raise GraphError(f"einsum index '{c}' has sizes {sizes[c]} and {d}")
            sizes[c] = max(sizes.get(c, 1), d)
    order = rhs + "".join(sorted(set(sizes) - set(rhs)))
    full = tuple(sizes[c] for c in order)
    aligned = []
    for term, op in zip(terms, operands, strict=True):
        present = [c for c in order if c in term]
        x = b.permute(op, [term.index(c) for c in present])
        x = b.reshape(
            x, [sizes[c] if c in term and op.shape[term.index(c)] != 1 else 1 for c in order]
        )
        aligned.append(b.expand(x, full))
    prod = aligned[0]
    for x in aligned[1:]:
        prod = b.binary(Op.MUL, prod, x)
    summed = list(range(len(rhs), len(order)))
    out = b.reduce(Op.SUM, prod, summed) if summed else prod
    return b.reshape(out, full[: len(rhs)])


def _ellipsis_rank(terms: Sequence[str], operands: Sequence[Value]) -> int:
    ranks = [
        op.ndim - len(t.replace("...", ""))
        for t, op in zip(terms, operands, strict=True)
        if "..." in t
    ]
    return max(ranks, default=0)


def _expand_ellipsis(term: str, ndim: int, letters: str) -> str:
    if "..." not in term:
        return term
    k = ndim - len(term.replace("...", ""))
    return term.replace("...", letters[len(letters) - k :])


def conv(
    b: GraphBuilder,
    x: Value,
    w: Value,
    bias: Value | None,
    strides: Sequence[int],
    pads: Sequence[tuple[int, int]],
    dilations: Sequence[int],
    groups: int = 1,
) -> Value:
    """N-d convolution (cross-correlation), NC* layout, weights [Cout, Cin/groups, *k]."""
    n, cin, *_ = x.shape
    cout, cin_g, *kernel = w.shape
    nd = len(kernel)
    if cin != cin_g * groups or cout % groups:
        raise GraphError(
            f"conv channels do not fit: input {x.shape}, weight {w.shape}, groups {groups}"
        )
    win = windows(b, x, kernel, strides, dilations, pads, 0.0)  # [N, Cin, *out, *k]
    out_sp = win.shape[2 : 2 + nd]
    g, cout_g = groups, cout // groups
    # [N, G, 1, Cin/G, *out, *k]  x  [1, G, Cout/G, Cin/G, 1.., *k]
    win = b.reshape(win, (n, g, 1, cin_g, *out_sp, *kernel))
    wt = b.reshape(w, (1, g, cout_g, cin_g, *([1] * nd), *kernel))
    full = (n, g, cout_g, cin_g, *out_sp, *kernel)
    prod = b.binary(Op.MUL, b.expand(win, full), b.expand(wt, full))
    reduced = [3, *range(4 + nd, 4 + 2 * nd)]
    y = b.reshape(b.reduce(Op.SUM, prod, reduced), (n, cout, *out_sp))
    if bias is not None:
        y = m.add(b, y, b.reshape(bias, (1, cout, *([1] * nd))))
    return y


def conv_transpose(
    b: GraphBuilder,
    x: Value,
    w: Value,
    bias: Value | None,
    strides: Sequence[int],
    pads: Sequence[tuple[int, int]],
    dilations: Sequence[int],
    output_padding: Sequence[int],
    groups: int = 1,
) -> Value:
    """Transposed convolution, weights [Cin, Cout/groups, *k]: the input spread out by the
    stride (zeros between elements), padded by (k-1)*d less the pads, convolved with the
    spatially flipped, channel-swapped kernel.  A negative pad crops."""
    nd = len(strides)
    cin, cout_g, *kernel = w.shape
    if x.shape[1] != cin or cin % groups:
        raise GraphError(f"conv_transpose channels do not fit: input {x.shape}, weight {w.shape}")
    lead = x.ndim - nd
    for ax, s in enumerate(strides):
        if s > 1:
            a = lead + ax
            i = x.shape[a]
            y = b.reshape(x, (*x.shape[: a + 1], 1, *x.shape[a + 1 :]))
            y = b.pad(y, [(0, 0)] * (a + 1) + [(0, s - 1)] + [(0, 0)] * (x.ndim - a - 1), 0)
            y = b.reshape(y, (*x.shape[:a], i * s, *x.shape[a + 1 :]))
            spec = [(0, 1, d) for d in y.shape]
            spec[a] = (0, 1, s * (i - 1) + 1)
            x = b.slice(y, spec)
    edges = []
    for ax in range(nd):
        full = (kernel[ax] - 1) * dilations[ax]
        edges.append((full - pads[ax][0], full - pads[ax][1] + output_padding[ax]))
    spec = [(0, 1, d) for d in x.shape]
    for ax, (lo, hi) in enumerate(edges):
        a = lead + ax
        start, stop = max(-lo, 0), x.shape[a] - max(-hi, 0)
        spec[a] = (start, 1, max(stop - start, 0))
    x = b.slice(x, spec)
    cin_g = cin // groups
    wt = b.reshape(w, (groups, cin_g, cout_g, *kernel))
    wt = b.permute(wt, (0, 2, 1, *range(3, 3 + nd)))
    wt = b.reshape(wt, (groups * cout_g, cin_g, *kernel))
    wt = b.slice(wt, [(0, 1, wt.shape[0]), (0, 1, cin_g), *((k - 1, -1, k) for k in kernel)])
    positive = [(max(lo, 0), max(hi, 0)) for lo, hi in edges]
    return conv(b, x, wt, bias, [1] * nd, positive, dilations, groups)
