"""ONNX Resize (opset 11+) and Upsample.

Shapes are static, so every axis' sampling plan is computed here, in numpy, the way the
ONNX reference computes it: for each output position, the source coordinate (per
`coordinate_transformation_mode`), its n neighbours (clamped to the edge) and their
weights (nearest, linear or cubic, optionally antialiased, `exclude_outside`).  The graph
then holds, per resized axis, one GATHER of the neighbours and a weighted SUM over them;
nearest sampling is the GATHER alone, so it is exact for every element type.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import GraphBuilder, Value
from luminal.errors import GraphError

Coeffs = Callable[[float, float], np.ndarray]
MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners")
MODES += ("asymmetric", "tf_crop_and_resize")


def _nearest(rounding: str) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        up = {
            "round_prefer_floor": ratio > 0.5,
            "round_prefer_ceil": ratio >= 0.5,
            "floor": False,
            "ceil": True,
        }[rounding]
        return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])

    return coeffs


def _linear(antialias: bool) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([1 - ratio, ratio])
        s = min(scale, 1.0)
        start = int(np.floor(-1 / s) + 1)
        args = (np.arange(start, start + 2 - 2 * start) - ratio) * s
        c = np.clip(1 - np.abs(args), 0, 1)
        return c / c.sum()

    return coeffs


def _cubic(a: float, antialias: bool) -> Coeffs:
    def kernel(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x**3 - (a + 3) * x**2 + 1
        if x < 2:
            return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
        return 0.0

    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array(
                [kernel(ratio + 1), kernel(ratio), kernel(1 - ratio), kernel(2 - ratio)]
            )
        s = min(scale, 1.0)
        start = int(np.floor(-2 / s) + 1)
        c = np.array([kernel(s * (i - ratio)) for i in range(start, 2 - start)])
        return c / c.sum()

    return coeffs


def axis_plan(
    in_w: int,
    out_w: int,
    scale: float,
    coeffs: Coeffs,
    mode: str,
    roi: tuple[float, float] | None,
    exclude_outside: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(neighbour indices [out, n], weights [out, n], extrapolated positions [out] or None)."""
    width = scale * in_w
    y = np.arange(out_w, dtype=np.float64)
    outside = None
    if mode == "align_corners":
        x = np.zeros(out_w) if width == 1 else y * (in_w - 1) / (width - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_crop_and_resize":
        if roi is None:
            raise GraphError("tf_crop_and_resize needs a roi")
        lo, hi = roi
        x = (
            np.full(out_w, (hi - lo) * (in_w - 1) / 2)
            if width == 1
            else y * (hi - lo) * (in_w - 1) / (width - 1)
        )
        x = x + lo * (in_w - 1)
        outside = (x < 0) | (x > in_w - 1)
    elif mode == "pytorch_half_pixel":
        x = np.full(out_w, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:  # half_pixel_symmetric
        x = in_w / 2 * (1 - out_w / width) + (y + 0.5) / scale - 0.5
    base = np.floor(x)
    ratios = np.where(x == base, 1.0, x - base)
    weights = np.array([coeffs(float(r), scale) for r in ratios], dtype=np.float64)
    n = weights.shape[1]
    pad = int(np.ceil(n / 2))
    xp = x + pad
    p = np.floor(xp)
    frac = xp - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (p + offset).astype(np.int64)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        weights = np.where((idx < 0) | (idx >= in_w), 0.0, weights)
        total = weights.sum(axis=-1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, in_w - 1), weights, outside


def resample_axis(
    b: GraphBuilder,
    x: Value,
    axis: int,
    plan: tuple[np.ndarray, np.ndarray, np.ndarray | None],
    extrapolation: float,
) -> Value:
    idx, weights, outside = plan
    out_w, n = idx.shape
    one_hot = np.all(np.sort(weights, axis=1)[:, :-1] == 0, axis=1) & np.all(
        weights.max(axis=1) == 1
    )
    if n == 0 or out_w == 0:
        raise GraphError("empty resampling plan")
    if bool(np.all(one_hot)):
        y = b.gather(x, b.const(idx[np.arange(out_w), weights.argmax(axis=1)]), axis)
    else:
        if not x.dtype.is_float:
            raise GraphError(
                f"interpolating {x.dtype.value} data (only nearest is exact for integers)"
            )
        g = b.gather(x, b.const(idx.reshape(-1)), axis)
        g = b.reshape(g, (*x.shape[:axis], out_w, n, *x.shape[axis + 1 :]))
        w = b.const(
            weights.astype(x.dtype.np).reshape(
                (1,) * axis + (out_w, n) + (1,) * (x.ndim - axis - 1)
            )
        )
        y = m.reduce_sum(b, m.mul(b, g, w), [axis + 1], keepdims=False)
    if outside is not None and outside.any():
        mask = b.const(outside.reshape((1,) * axis + (out_w,) + (1,) * (x.ndim - axis - 1)))
        y = m.where(b, mask, m.like(b, extrapolation, y), y)
    return y


def _resize(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    if ctx.opset < 11:
        raise ctx.unsupported("Resize before opset 11 (convert the model to opset 11 or newer)")
    mode = ctx.attr("mode", "nearest")
    ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
    nearest_mode = ctx.attr("nearest_mode", "round_prefer_floor")
    antialias = bool(ctx.attr("antialias", 0))
    exclude_outside = bool(ctx.attr("exclude_outside", 0))
    extrapolation = float(ctx.attr("extrapolation_value", 0.0))
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    cubic_a = float(ctx.attr("cubic_coeff_a", -0.75))
    if ctm not in MODES:
        raise ctx.unsupported(f"coordinate_transformation_mode='{ctm}'")
    if mode == "nearest":
        if antialias:
            raise ctx.error("antialias does not apply to nearest")
        if nearest_mode not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
            raise ctx.unsupported(f"nearest_mode='{nearest_mode}'")
        coeffs = _nearest(nearest_mode)
    elif mode == "linear":
        coeffs = _linear(antialias)
    elif mode == "cubic":
        coeffs = _cubic(cubic_a, antialias)
    else:
        raise ctx.unsupported(f"mode='{mode}'")
    r = x.ndim
    axes = [a % r for a in (ctx.attr("axes") or range(r))]
    roi_v, scales_v, sizes_v = ctx.const(1, "roi"), ctx.const(2, "scales"), ctx.const(3, "sizes")
    roi = None if roi_v is None or roi_v.size == 0 else [float(v) for v in roi_v.reshape(-1)]
    scales = (
        None if scales_v is None or scales_v.size == 0 else [float(v) for v in scales_v.reshape(-1)]
    )
    sizes = None if sizes_v is None or sizes_v.size == 0 else [int(v) for v in sizes_v.reshape(-1)]
    if (scales is None) == (sizes is None):
        raise ctx.error("exactly one of scales and sizes must be given")
    full_roi = None
    if roi is not None:
        if len(roi) != 2 * len(axes):
            raise ctx.error(f"roi has {len(roi)} values for {len(axes)} axes")
        full_roi = [0.0] * r + [1.0] * r
        for i, a in enumerate(axes):
            full_roi[a], full_roi[r + a] = roi[i], roi[len(axes) + i]
    factors, out = _output_shape(ctx, x.shape, axes, scales, sizes, policy)
    for a in axes:
        trivial_roi = full_roi is None or (
            math.isclose(full_roi[a], 0.0) and math.isclose(full_roi[a + r], 1.0)
        )
        if math.isclose(factors[a], 1.0) and out[a] == x.shape[a] and trivial_roi:
            continue
        axis_roi = None if full_roi is None else (full_roi[a], full_roi[a + r])
        plan = axis_plan(x.shape[a], out[a], factors[a], coeffs, ctm, axis_roi, exclude_outside)
        x = resample_axis(b, x, a, plan, extrapolation)
    return [x]


def _output_shape(
    ctx: NodeContext,
    shape: Sequence[int],
    axes: list[int],
    scales: list[float] | None,
    sizes: list[int] | None,
    policy: str,
) -> tuple[list[float], list[int]]:
    r = len(shape)
    if scales is not None:
        if len(scales) != len(axes):
            raise ctx.error(f"{len(scales)} scales for {len(axes)} axes")
        factors = [1.0] * r
        for i, a in enumerate(axes):
            factors[a] = scales[i]
        return factors, [int(f * d) for f, d in zip(factors, shape, strict=True)]
    assert sizes is not None
    if len(sizes) != len(axes):
        raise ctx.error(f"{len(sizes)} sizes for {len(axes)} axes")
    out = list(shape)
    for i, a in enumerate(axes):
        out[a] = sizes[i]
    factors = [o / d for o, d in zip(out, shape, strict=True)]
    if policy != "stretch":
        if policy not in ("not_larger", "not_smaller"):
            raise ctx.unsupported(f"keep_aspect_ratio_policy='{policy}'")
        picked = [factors[a] for a in axes]
        scale = min(picked) if policy == "not_larger" else max(picked)
        factors = [scale if a in axes else 1.0 for a in range(r)]
        out = [int(scale * shape[a] + 0.5) if a in axes else shape[a] for a in range(r)]
    return factors, out


def _upsample(ctx: NodeContext) -> list[Value]:
    b, x = ctx.b, ctx.input(0)
    mode = ctx.attr("mode", "nearest")
    raw = ctx.attr("scales") if ctx.opset < 9 else ctx.const(1, "scales")
    scales = [float(s) for s in np.asarray(raw).reshape(-1)]
    if mode != "nearest" or any(not s.is_integer() for s in scales):
        raise ctx.unsupported(f"mode='{mode}' with scales {scales} (integer nearest only)")
    for a, s in enumerate(scales):
        if s != 1:
            k = int(s)
            y = b.expand(
                b.reshape(x, (*x.shape[: a + 1], 1, *x.shape[a + 1 :])),
                (*x.shape[: a + 1], k, *x.shape[a + 1 :]),
            )
            x = b.reshape(y, (*x.shape[:a], x.shape[a] * k, *x.shape[a + 1 :]))
    return [x]


OPS: dict[str, Lowering] = {
    "Resize": _resize,
    "Upsample": _upsample,
}
