"""ONNX reductions.  `axes` moved from attribute to input (ReduceSum at opset 13, the
rest at 18); both forms are read by opset."""

from __future__ import annotations

from collections.abc import Callable

from luminal.compiler.frontend.compose import gather as gx
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.frontend.onnx_ops.context import Lowering, NodeContext
from luminal.compiler.ir import GraphBuilder, Op, Value

Reducer = Callable[[GraphBuilder, Value, list[int], bool], Value]


def _reduction(fn: Reducer, axes_input_since: int) -> Lowering:
    def lower(ctx: NodeContext) -> list[Value]:
        x = ctx.input(0)
        keep = bool(ctx.attr("keepdims", 1))
        if ctx.opset >= axes_input_since:
            axes = ctx.ints(1, "axes")
            noop_empty = bool(ctx.attr("noop_with_empty_axes", 0))
        else:
            raw = ctx.attr("axes")
            axes, noop_empty = (None if raw is None else list(raw)), False
        if not axes:
            if noop_empty:
                return [x]
            axes = list(range(x.ndim))
        axes = [a % max(x.ndim, 1) for a in axes]
        if x.ndim == 0:
            return [x]
        return [fn(ctx.b, x, axes, keep)]

    return lower


def _sum_square(b: GraphBuilder, x: Value, axes: list[int], keep: bool) -> Value:
    return m.reduce_sum(b, b.binary(Op.MUL, x, x), axes, keep)


def _l2(b: GraphBuilder, x: Value, axes: list[int], keep: bool) -> Value:
    return m.sqrt(b, _sum_square(b, x, axes, keep))


def _l1(b: GraphBuilder, x: Value, axes: list[int], keep: bool) -> Value:
    return m.reduce_sum(b, m.abs_(b, x), axes, keep)


def _log_sum_exp(b: GraphBuilder, x: Value, axes: list[int], keep: bool) -> Value:
    top = m.reduce_max(b, x, axes, True)
    shifted = m.sub(b, x, top)
    total = m.log(b, m.reduce_sum(b, m.exp(b, shifted), axes, True))
    out = m.add(b, total, top)
    return out if keep else m.reduce_sum(b, out, axes, False)


def _log_sum(b: GraphBuilder, x: Value, axes: list[int], keep: bool) -> Value:
    return m.log(b, m.reduce_sum(b, x, axes, keep))


OPS: dict[str, Lowering] = {
    "ReduceProd": _reduction(gx.reduce_prod, 18),
    "ReduceLogSum": _reduction(_log_sum, 18),
    "ReduceSum": _reduction(m.reduce_sum, 13),
    "ReduceMean": _reduction(m.reduce_mean, 18),
    "ReduceMax": _reduction(m.reduce_max, 18),
    "ReduceMin": _reduction(m.reduce_min, 18),
    "ReduceSumSquare": _reduction(_sum_square, 18),
    "ReduceL1": _reduction(_l1, 18),
    "ReduceL2": _reduction(_l2, 18),
    "ReduceLogSumExp": _reduction(_log_sum_exp, 18),
}
