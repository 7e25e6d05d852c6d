"""Sliding windows as pure views, and pooling built on them.

For one axis of length i, kernel k, dilation d and stride s, repeating the data r times
and reading it as rows of length i + d gives row q, column j = x[(q*d + j) mod i]; no
window wraps around because q*d + j <= (k-1)*d + (o-1)*s <= i-1.  Taking every s-th
column leaves the [k, o] windows.  Only views are used: EXPAND, RESHAPE and SLICE.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import GraphBuilder, Op, Value
from luminal.errors import GraphError


def out_size(i: int, k: int, s: int, d: int) -> int:
    return (i - d * (k - 1) - 1) // s + 1


def windows(
    b: GraphBuilder,
    x: Value,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[tuple[int, int]],
    pad_value: float,
) -> Value:
    """[N, C, *spatial] -> [N, C, *out, *kernel] (pads applied with `pad_value`)."""
    nd = len(kernel)
    lead = x.ndim - nd
    x = b.pad(x, [(0, 0)] * lead + [tuple(p) for p in pads], pad_value)
    names = [f"l{k}" for k in range(lead)] + [f"s{k}" for k in range(nd)]
    for ax in range(nd):
        pos = names.index(f"s{ax}")
        perm = [k for k in range(len(names)) if k != pos] + [pos]
        x = b.permute(x, perm)
        names = [names[k] for k in perm][:-1]
        x = _window_last_axis(b, x, kernel[ax], strides[ax], dilations[ax])
        names += [f"k{ax}", f"o{ax}"]
    want = (
        [f"l{k}" for k in range(lead)] + [f"o{k}" for k in range(nd)] + [f"k{k}" for k in range(nd)]
    )
    return b.permute(x, [names.index(n) for n in want])


def _window_last_axis(b: GraphBuilder, x: Value, k: int, s: int, d: int) -> Value:
    *lead, i = x.shape
    o = out_size(i, k, s, d)
    if o <= 0:
        raise GraphError(f"window of size {k} (dilation {d}) does not fit an axis of length {i}")
    keep = [(0, 1, n) for n in lead]
    if k == 1:
        x = b.slice(x, [*keep, (0, s, o)])
        return b.reshape(x, (*lead, 1, o))
    r = math.ceil(k * (i + d) / i)
    x = b.reshape(x, (*lead, 1, i))
    x = b.expand(x, (*lead, r, i))
    x = b.reshape(x, (*lead, r * i))
    x = b.slice(x, [*keep, (0, 1, k * (i + d))])
    x = b.reshape(x, (*lead, k, i + d))
    return b.slice(x, [*keep, (0, 1, k), (0, s, o)])


def ceil_pads(
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[tuple[int, int]],
) -> list[tuple[int, int]]:
    """Extra end padding so floor-mode windows give ceil-mode's output size.  As in ONNX
    and PyTorch, the last window must start inside the input or the left padding."""
    out = []
    for i, k, s, d, (lo, hi) in zip(spatial, kernel, strides, dilations, pads, strict=True):
        span = i + lo + hi - d * (k - 1) - 1
        o = -(-span // s) + 1
        if (o - 1) * s >= i + lo:
            o -= 1
        extra = max(0, (o - 1) * s + d * (k - 1) + 1 - (i + lo + hi))
        out.append((lo, hi + extra))
    return out


def max_pool(
    b: GraphBuilder,
    x: Value,
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[tuple[int, int]],
    dilations: Sequence[int],
) -> Value:
    nd = len(kernel)
    fill = -np.inf if x.dtype.is_float else int(np.iinfo(x.dtype.np).min)
    win = windows(b, x, kernel, strides, dilations, pads, fill)
    axes = list(range(win.ndim - nd, win.ndim))
    return m.reduce_max(b, win, axes, keepdims=False)


def avg_pool(
    b: GraphBuilder,
    x: Value,
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[tuple[int, int]],
    dilations: Sequence[int],
    count_include_pad: bool,
    real_pads: Sequence[tuple[int, int]] | None = None,
) -> Value:
    """Average over windows.  `real_pads` are the user's pads when `pads` also holds
    ceil-mode padding, which never counts toward the divisor."""
    nd = len(kernel)
    win = windows(b, x, kernel, strides, dilations, pads, 0.0)
    axes = list(range(win.ndim - nd, win.ndim))
    total = m.reduce_sum(b, win, axes, keepdims=False)
    counts = _window_counts(
        x.shape[-nd:], kernel, strides, dilations, pads, real_pads or pads, count_include_pad
    )
    inv = b.const((1.0 / counts).astype(x.dtype.np))
    return m.mul(b, total, inv)


def _window_counts(spatial, kernel, strides, dilations, pads, real_pads, include_pad) -> np.ndarray:  # type: ignore[no-untyped-def]
    """How many cells of each window count toward the average (computed at compile time)."""
    ones = np.ones(tuple(spatial), dtype=np.float64)
    inner = [(lo, hi) for lo, hi in real_pads] if include_pad else [(0, 0)] * len(spatial)
    counted = np.pad(ones, inner, constant_values=1.0 if include_pad else 0.0)
    rest = [(lo - a, hi - c) for (lo, hi), (a, c) in zip(pads, inner, strict=True)]
    counted = np.pad(counted, rest, constant_values=0.0)
    for ax, (k, s, d) in enumerate(zip(kernel, strides, dilations, strict=True)):
        o = out_size(counted.shape[ax], k, s, d)
        taps = [
            np.take(counted, range(q * d, q * d + s * (o - 1) + 1, s), axis=ax) for q in range(k)
        ]
        counted = np.sum(taps, axis=0)
    return np.maximum(counted, 1.0)


def global_avg_pool(b: GraphBuilder, x: Value) -> Value:
    return m.reduce_mean(b, x, list(range(2, x.ndim)), keepdims=True)


def global_max_pool(b: GraphBuilder, x: Value) -> Value:
    return b.reduce(Op.RMAX, x, list(range(2, x.ndim)))
