"""Remaining ONNX ops: Det, MaxUnpool, Col2Im, TensorScatter, TfIdfVectorizer, RoiAlign."""

from __future__ import annotations

import itertools
import math

import numpy as np

from luminal.compiler.frontend.compose import gather as gx
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.compose import shape
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, Op, Value

MAX_DET = 4  # Leibniz expansion: n! terms


def _det(ctx: NodeContext) -> list[Value]:
    """Determinant by the Leibniz formula (sum over permutations), for n <= MAX_DET."""
    b, x = ctx.b, ctx.input(0)
    n = x.shape[-1]
    if x.ndim < 2 or x.shape[-2] != n:
        raise ctx.error(f"Det needs square matrices, got {x.shape}")
    if n > MAX_DET:
        raise ctx.unsupported(f"the determinant of {n}x{n} matrices (up to {MAX_DET}x{MAX_DET})")
    lead = x.shape[:-2]
    keep = [(0, 1, d) for d in lead]

    def entry(i: int, j: int) -> Value:
        return b.reshape(b.slice(x, [*keep, (i, 1, 1), (j, 1, 1)]), lead)

    total: Value | None = None
    for perm in itertools.permutations(range(n)):
        term = entry(0, perm[0])
        for i in range(1, n):
            term = m.mul(b, term, entry(i, perm[i]))
        inversions = sum(1 for i in range(n) for j in range(i + 1, n) if perm[i] > perm[j])
        if inversions % 2:
            term = m.neg(b, term)
        total = term if total is None else m.add(b, total, term)
    assert total is not None
    return [total]


def _max_unpool(ctx: NodeContext) -> list[Value]:
    b, x, idx = ctx.b, ctx.input(0), ctx.input(1)
    kernel = list(ctx.attr("kernel_shape"))
    nd = len(kernel)
    strides = list(ctx.attr("strides", [1] * nd))
    pads = list(ctx.attr("pads", [0] * (2 * nd)))
    inferred = [
        (x.shape[2 + k] - 1) * strides[k] - (pads[k] + pads[nd + k]) + kernel[k] for k in range(nd)
    ]
    shape = (*x.shape[:2], *inferred)
    out_v = ctx.const(2, "output_shape")
    total = math.prod(shape)
    flat_idx = b.reshape(b.cast(idx, DType.I64), (math.prod(x.shape),))
    zeros = m.full(b, 0, (total,), x.dtype)
    y = b.reshape(b.scatter(zeros, flat_idx, b.reshape(x, (math.prod(x.shape),)), 0), shape)
    if out_v is None:
        return [y]
    target = [int(v) for v in np.asarray(out_v).reshape(-1)]
    if len(target) != len(shape) or any(t < s for t, s in zip(target, shape, strict=True)):
        raise ctx.error(f"output_shape {target} is smaller than the unpooled {list(shape)}")
    return [b.pad(y, [(0, t - s) for t, s in zip(target, shape, strict=True)], 0)]


OPS: dict[str, Lowering] = {"Det": _det, "MaxUnpool": _max_unpool}


def _col2im(ctx: NodeContext) -> list[Value]:
    """Sum each column entry into its image position; every position gathers its (at most
    prod(block)) contributions through an index table built here, padded with a zero."""
    b, x = ctx.b, ctx.input(0)
    image = [int(v) for v in np.asarray(ctx.const(1, "image_shape")).reshape(-1)]
    block = [int(v) for v in np.asarray(ctx.const(2, "block_shape")).reshape(-1)]
    nd = len(image)
    dil = list(ctx.attr("dilations", [1] * nd))
    strides = list(ctx.attr("strides", [1] * nd))
    pads = list(ctx.attr("pads", [0] * (2 * nd)))
    n, ck, length = x.shape
    k = math.prod(block)
    if ck % k:
        raise ctx.error(f"{ck} rows do not split into blocks of {k}")
    c = ck // k
    cols = [
        (image[i] + pads[i] + pads[i + nd] - (dil[i] * (block[i] - 1) + 1)) // strides[i] + 1
        for i in range(nd)
    ]
    if math.prod(cols) != length:
        raise ctx.error(f"{length} columns, but the blocks give {math.prod(cols)}")
    sources: list[list[int]] = [[] for _ in range(math.prod(image))]
    for kk, offset in enumerate(itertools.product(*(range(s) for s in block))):
        for col, where in enumerate(itertools.product(*(range(s) for s in cols))):
            pos = [where[i] * strides[i] - pads[i] + offset[i] * dil[i] for i in range(nd)]
            if all(0 <= p < image[i] for i, p in enumerate(pos)):
                sources[int(np.ravel_multi_index(pos, image))].append(kk * length + col)
    slots = max(1, max(len(s) for s in sources))
    table = np.full((len(sources), slots), k * length, np.int64)  # the appended zero
    for p, s in enumerate(sources):
        table[p, : len(s)] = s
    flat = b.pad(b.reshape(x, (n, c, k * length)), [(0, 0), (0, 0), (0, 1)], 0)
    picked = b.gather(flat, b.const(table.reshape(-1)), 2)
    summed = m.reduce_sum(b, b.reshape(picked, (n, c, len(sources), slots)), [3], keepdims=False)
    return [b.reshape(summed, (n, c, *image))]


def _tensor_scatter(ctx: NodeContext) -> list[Value]:
    b, past, update = ctx.b, ctx.input(0), ctx.input(1)
    writes = ctx.optional(2)
    mode = ctx.attr("mode", "linear")
    axis = int(ctx.attr("axis", -2)) % past.ndim
    if mode not in ("linear", "circular") or axis == 0:
        raise ctx.unsupported(f"mode='{mode}', axis={axis}")
    size, count = past.shape[axis], update.shape[axis]
    batch = past.shape[0]
    pos = b.iota(past.shape, axis)
    if writes is None:
        start = m.full(b, 0, past.shape, DType.I64)
    else:
        shape = (batch, *([1] * (past.ndim - 1)))
        start = b.expand(b.reshape(b.cast(writes, DType.I64), shape), past.shape)
    offset = m.sub(b, pos, start)
    if mode == "circular":
        offset = m.mod(b, offset, m.like(b, size, offset), fmod=False)
    valid = m.logical_and(
        b,
        m.logical_not(b, b.binary(Op.CMPLT, offset, m.like(b, 0, offset))),
        b.binary(Op.CMPLT, offset, m.like(b, count, offset)),
    )
    index = b.where(valid, offset, m.like(b, 0, offset))
    moved = gx.gather_elements(b, update, index, axis) if count else past
    return [b.where(valid, moved, past)]


OPS.update({"Col2Im": _col2im, "TensorScatter": _tensor_scatter})


def _tfidf(ctx: NodeContext) -> list[Value]:
    """N-gram (skip-gram) counts over integer tokens, as the reference's trie walk counts
    them: an n-gram of the pool matches at start s with skip distance d when
    x[s + k*d] is its k-th token for every k; unigrams count once, longer grams once per
    distance d in 1..max_skip_count+1."""
    b, x = ctx.b, ctx.input(0)
    if ctx.attr("pool_strings"):
        raise ctx.unsupported("string pools")
    pool = [int(v) for v in ctx.attr("pool_int64s", [])]
    counts = [int(v) for v in ctx.attr("ngram_counts")]
    indexes = [int(v) for v in ctx.attr("ngram_indexes")]
    lo, hi = int(ctx.attr("min_gram_length")), int(ctx.attr("max_gram_length"))
    skips, mode = int(ctx.attr("max_skip_count")), ctx.attr("mode")
    weights = [float(v) for v in ctx.attr("weights", [])]
    if not x.dtype.is_int or x.ndim not in (1, 2) or mode not in ("TF", "IDF", "TFIDF"):
        raise ctx.unsupported(f"mode '{mode}' on {x.dtype.value} input of rank {x.ndim}")
    rows = b.reshape(x, (1, x.shape[0])) if x.ndim == 1 else x
    batch, length = rows.shape
    grams: list[tuple[int, ...]] = []
    for n, start in enumerate(counts, start=1):
        end = counts[n] if n < len(counts) else len(pool)
        grams += [tuple(pool[i : i + n]) for i in range(start, end, n)]
    size = max(indexes) + 1
    columns: list[Value | None] = [None] * size
    for gid, gram in enumerate(grams):
        n = len(gram)
        if not lo <= n <= hi:
            continue
        total: Value | None = None
        for d in [1] if n == 1 else range(1, skips + 2):
            span = length - (n - 1) * d
            if span <= 0:
                continue
            hit: Value | None = None
            for k, token in enumerate(gram):
                part = b.slice(rows, [(0, 1, batch), (k * d, 1, span)])
                eq = b.binary(Op.CMPEQ, part, m.like(b, token, part))
                hit = eq if hit is None else m.logical_and(b, hit, eq)
            assert hit is not None
            found = m.reduce_sum(b, b.cast(hit, DType.I64), [1], keepdims=True)
            total = found if total is None else m.add(b, total, found)
        if total is not None:
            slot = indexes[gid]
            columns[slot] = total if columns[slot] is None else m.add(b, columns[slot], total)
    zero = m.full(b, 0, (batch, 1), DType.I64)
    freq = b.cast(
        b.reshape(shape.concat(b, [c or zero for c in columns], 1), (batch, size)), DType.F32
    )
    w = b.const(np.asarray(weights or [1.0] * size, np.float32)[:size].reshape(1, size))
    if mode == "IDF":
        seen = b.binary(Op.CMPLT, m.like(b, 0.0, freq), freq)
        freq = m.where(b, seen, m.broadcast_to(b, w, freq.shape), m.like(b, 0.0, freq))
    elif mode == "TFIDF" and weights:
        freq = m.mul(b, freq, w)
    return [b.reshape(freq, (size,)) if x.ndim == 1 else freq]


OPS["TfIdfVectorizer"] = _tfidf


def _roi_plan(
    roi: np.ndarray,
    height: int,
    width: int,
    out_h: int,
    out_w: int,
    ratio: int,
    scale: float,
    half: bool,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The reference's bilinear sampling plan for one box: positions and weights
    [out_h * out_w, samples, 4] and the sample count per bin."""
    off = 0.5 if half else 0.0
    x0, y0, x1, y1 = (float(v) * scale - off for v in roi[:4])
    rw, rh = x1 - x0, y1 - y0
    if not half:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / out_h, rw / out_w
    gh = ratio if ratio > 0 else int(np.ceil(rh / out_h))
    gw = ratio if ratio > 0 else int(np.ceil(rw / out_w))
    samples = max(gh * gw, 1)
    pos = np.zeros((out_h * out_w, samples, 4), np.int64)
    wts = np.zeros((out_h * out_w, samples, 4), np.float64)
    for p, (ph, pw) in enumerate(itertools.product(range(out_h), range(out_w))):
        for s, (iy, ix) in enumerate(itertools.product(range(gh), range(gw))):
            y = y0 + ph * bh + (iy + 0.5) * bh / gh
            x = x0 + pw * bw + (ix + 0.5) * bw / gw
            if y < -1.0 or y > height or x < -1.0 or x > width:
                continue
            y, x = max(y, 0.0), max(x, 0.0)
            yl, xl = int(y), int(x)
            if yl >= height - 1:
                yl = yh = height - 1
                y = yl
            else:
                yh = yl + 1
            if xl >= width - 1:
                xl = xh = width - 1
                x = xl
            else:
                xh = xl + 1
            ly, lx = y - yl, x - xl
            pos[p, s] = [yl * width + xl, yl * width + xh, yh * width + xl, yh * width + xh]
            wts[p, s] = [(1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx]
    return pos, wts, gh * gw


def _roi_align(ctx: NodeContext) -> list[Value]:
    """RoiAlign with the boxes known when compiling (the ONNX backend specializes them):
    every sample's four neighbours and weights are fixed, the data stays an input."""
    b, x = ctx.b, ctx.input(0)
    rois, batch = ctx.const(1, "rois"), ctx.const(2, "batch_indices")
    assert rois is not None and batch is not None
    mode = ctx.attr("mode", "avg")
    half = ctx.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    out_h, out_w = int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))
    ratio, scale = int(ctx.attr("sampling_ratio", 0)), float(ctx.attr("spatial_scale", 1.0))
    if mode not in ("avg", "max") or x.ndim != 4:
        raise ctx.unsupported(f"mode='{mode}' on rank {x.ndim}")
    n, c, height, width = x.shape
    plans = [
        _roi_plan(r, height, width, out_h, out_w, ratio, scale, half) for r in np.asarray(rois)
    ]
    most = max(p[0].shape[1] for p in plans)
    pos = np.zeros((len(plans), out_h * out_w, most, 4), np.int64)
    wts = np.zeros_like(pos, dtype=np.float64)
    for k, ((p, w, count), img) in enumerate(
        zip(plans, np.asarray(batch).reshape(-1), strict=True)
    ):
        if not 0 <= int(img) < n:
            raise ctx.error(f"batch index {int(img)} out of range for {n} images")
        s = p.shape[1]
        pos[k, :, :s] = p + int(img) * height * width
        wts[k, :, :s] = w / count if mode == "avg" else w
        if mode == "max" and s < most:  # repeat a sample: the max is unchanged
            pos[k, :, s:] = pos[k, :, :1]
            wts[k, :, s:] = wts[k, :, :1]
    table = b.reshape(b.permute(x, (0, 2, 3, 1)), (n * height * width, c))
    picked = b.gather(table, b.const(pos), 0)  # [R, P, S, 4, C]
    weighted = m.mul(b, picked, b.const(wts.astype(x.dtype.np)[..., None]))
    if mode == "avg":
        out = m.reduce_sum(b, weighted, [2, 3], keepdims=False)
    else:
        out = m.reduce_max(b, m.reduce_max(b, weighted, [3], keepdims=False), [2], keepdims=False)
    return [b.reshape(b.permute(out, (0, 2, 1)), (len(plans), c, out_h, out_w))]


OPS["RoiAlign"] = _roi_align
