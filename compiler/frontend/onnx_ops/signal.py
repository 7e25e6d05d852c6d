"""ONNX signal ops: DFT (forward, inverse, one-sided, real inverse), STFT, MelWeightMatrix.

The transform length is static, so a DFT is a contraction with constant cosine and sine
matrices along its axis, computed in f64 (as numpy's FFT, which the reference uses) and
rounded to the input type once.
"""

from __future__ import annotations

import numpy as np

from luminal.compiler.frontend.compose import contraction, shape
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import DType, GraphBuilder, Value


def _along(b: GraphBuilder, x: Value, axis: int, matrix: np.ndarray) -> Value:
    """Contract `x`'s `axis` with matrix [len, out]: the axis becomes `out` long."""
    perm = [k for k in range(x.ndim) if k != axis] + [axis]
    moved = contraction.matmul(b, b.permute(x, perm), b.const(matrix))
    inverse = [perm.index(k) for k in range(x.ndim)]
    return b.permute(moved, inverse)


def _fit(b: GraphBuilder, x: Value, axis: int, length: int) -> Value:
    """Crop or zero-pad `axis` to `length` (numpy's FFT `n`)."""
    have = x.shape[axis]
    if have > length:
        spec = [(0, 1, d) for d in x.shape]
        spec[axis] = (0, 1, length)
        return b.slice(x, spec)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, length - have)
    return b.pad(x, widths, 0.0)


def dft(b: GraphBuilder, x: Value, axis: int, n: int, inverse: bool, onesided: bool) -> Value:
    """x [..., 1 or 2] (real, or interleaved real/imaginary) -> [..., 2] (or [..., 1] for
    the real inverse of a one-sided spectrum)."""
    dtype = x.dtype
    x = b.cast(x, DType.F64)
    lead = x.shape[:-1]
    keep = [(0, 1, d) for d in lead]
    re = b.reshape(b.slice(x, [*keep, (0, 1, 1)]), lead)
    im = b.reshape(b.slice(x, [*keep, (1, 1, 1)]), lead) if x.shape[-1] == 2 else None
    if inverse and onesided:  # hermitian spectrum -> real signal (numpy's irfft)
        half = n // 2 + 1
        k = np.arange(half)[:, None]
        t = np.arange(n)[None, :]
        weight = np.full((half, 1), 2.0)
        weight[0] = 1.0
        if n % 2 == 0:
            weight[-1] = 1.0
        angle = 2 * np.pi * k * t / n
        out = _along(b, _fit(b, re, axis, half), axis, weight * np.cos(angle) / n)
        if im is not None:
            out = m.add(
                b, out, _along(b, _fit(b, im, axis, half), axis, -weight * np.sin(angle) / n)
            )
        return b.cast(b.reshape(out, (*out.shape, 1)), dtype)
    count = n // 2 + 1 if onesided else n
    k = np.arange(n)[:, None]
    f = np.arange(count)[None, :]
    angle = 2 * np.pi * k * f / n
    cos, sin = np.cos(angle), np.sin(angle)
    scale = 1.0 / n if inverse else 1.0
    sign = 1.0 if inverse else -1.0
    re = _fit(b, re, axis, n)
    out_re = _along(b, re, axis, cos * scale)
    out_im = _along(b, re, axis, sign * sin * scale)
    if im is not None:
        im = _fit(b, im, axis, n)
        out_re = m.sub(b, out_re, _along(b, im, axis, sign * sin * scale))
        out_im = m.add(b, out_im, _along(b, im, axis, cos * scale))
    both = [b.reshape(v, (*v.shape, 1)) for v in (out_re, out_im)]
    return b.cast(shape.concat(b, both, both[0].ndim - 1), dtype)


def _dft(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    if ctx.opset < 20:
        axis = int(ctx.attr("axis", 1))
    else:
        given = ctx.ints(2, "axis")
        axis = -2 if given is None else given[0]
    if not -x.ndim <= axis < x.ndim - 1 and axis != -1:
        raise ctx.error(f"axis {axis} is not a signal axis of rank {x.ndim}")
    axis %= x.ndim
    if axis == x.ndim - 1:
        raise ctx.error("the last axis holds the real and imaginary parts")
    length = ctx.ints(1, "dft_length")
    if length is not None:
        n = length[0]
    else:
        n = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    if x.shape[-1] not in (1, 2):
        raise ctx.error(f"the last dim must be 1 (real) or 2 (complex), got {x.shape[-1]}")
    return [dft(ctx.b, x, axis, n, inverse, onesided)]


def _stft(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    step = ctx.ints(1, "frame_step")
    window = ctx.optional(2)
    length = ctx.ints(3, "frame_length")
    onesided = bool(ctx.attr("onesided", 1))
    assert step is not None
    frame = length[0] if length else (window.shape[0] if window is not None else x.shape[-2])
    frames = 1 + (x.shape[-2] - frame) // step[0]
    if frames <= 0:
        raise ctx.error(f"frame length {frame} exceeds the signal length {x.shape[-2]}")
    index = (np.arange(frames)[:, None] * step[0] + np.arange(frame)[None, :]).reshape(-1)
    picked = b.gather(x, b.const(index.astype(np.int64)), 1)
    picked = b.reshape(picked, (x.shape[0], frames, frame, x.shape[-1]))
    if window is not None:
        picked = m.mul(b, picked, b.reshape(window, (1, 1, frame, 1)))
    return [dft(b, picked, 2, frame, False, onesided)]


def _mel_weight_matrix(ctx: NodeContext) -> list[Value]:
    values = [ctx.const(i, n) for i, n in enumerate(("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"))]  # fmt: skip
    bins, length, rate, low, high = (np.asarray(v).reshape(()) for v in values)  # type: ignore[arg-type]
    mel_bins, dft_length = int(bins), int(length)
    spectrogram = dft_length // 2 + 1
    points = np.arange(0, mel_bins + 2)
    low_mel = 2595 * np.log1p(low / 700) / np.log(10)
    high_mel = 2595 * np.log1p(high / 700) / np.log(10)
    step = (high_mel - low_mel) / points.shape[0]
    freq = 700 * np.expm1((points * step + low_mel) / 2595 * np.log(10))
    freq = (((dft_length + 1) * freq) // rate).astype(int)
    out = np.zeros((spectrogram, mel_bins))
    for i in range(mel_bins):
        lo, mid, hi = freq[i], freq[i + 1], freq[i + 2]
        if mid == lo:
            out[mid, i] = 1
        else:
            for j in range(lo, mid + 1):
                out[j, i] = (j - lo) / (mid - lo)
        for j in range(mid, hi):
            out[j, i] = (hi - j) / (hi - mid)
    dtype = ctx.dtype(ctx.attr("output_datatype", 1))
    return [ctx.b.const(out.astype(dtype.np))]


OPS: dict[str, Lowering] = {
    "DFT": _dft,
    "STFT": _stft,
    "MelWeightMatrix": _mel_weight_matrix,
}
