"""ONNX control flow with static structure: If on a constant condition, Scan, and Loop
with a trip count and condition that fold to constants.

Shapes are static and the IR has no branches, so a branch is chosen while lowering and a
loop is unrolled: each iteration lowers the body again with its inputs bound to that
iteration's values.  A condition or trip count that depends on input data is refused
(`DataDependent`, which the ONNX backend resolves by specializing the inputs it comes
from); a loop longer than MAX_ITERATIONS is refused as well.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from luminal.compiler.frontend.compose import shape as s
from luminal.compiler.frontend.onnx_ops.context import DataDependent
from luminal.compiler.ir import GraphBuilder, Value
from luminal.errors import FrontendError, UnsupportedOp

MAX_ITERATIONS = 256

#: lower(node, env) lowers one node of a subgraph into env
LowerNode = Callable[[onnx.NodeProto, MutableMapping[str, Value]], None]


class _Ctx:
    def __init__(
        self, b: GraphBuilder, node: onnx.NodeProto, env: MutableMapping[str, Value], opset: int
    ) -> None:
        self.b, self.node, self.env, self.opset = b, node, env, opset
        self.name = node.name or (node.output[0] if node.output else "?")

    def where(self) -> dict[str, object]:
        return {"op": self.node.op_type, "node": self.name, "opset": self.opset}

    def graph(self, attr: str) -> onnx.GraphProto:
        for a in self.node.attribute:
            if a.name == attr:
                return a.g
        raise FrontendError(f"attribute '{attr}' is required", **self.where())  # type: ignore[arg-type]

    def ints(self, attr: str, default: list[int]) -> list[int]:
        for a in self.node.attribute:
            if a.name == attr:
                return [int(v) for v in helper.get_attribute_value(a)]
        return default

    def int(self, attr: str, default: int) -> int:
        for a in self.node.attribute:
            if a.name == attr:
                return int(helper.get_attribute_value(a))
        return default

    def constant(self, index: int, what: str) -> np.ndarray | None:
        name = self.node.input[index] if index < len(self.node.input) else ""
        if not name:
            return None
        value = self.b.const_value(self.env[name])
        if value is None:
            raise DataDependent(f"the {what} must be a constant", values=(name,), **self.where())  # type: ignore[arg-type]
        return value


def _run_body(
    ctx: _Ctx, graph: onnx.GraphProto, bindings: list[Value | None], lower: LowerNode
) -> list[Value]:
    """Lower `graph` once with its inputs bound; its outputs."""
    scope: dict[str, Value] = dict(ctx.env)
    for vi, value in zip(graph.input, bindings, strict=False):
        if value is not None:
            scope[vi.name] = value
    for init in graph.initializer:
        scope[init.name] = ctx.b.const(numpy_helper.to_array(init))
    for node in graph.node:
        lower(node, scope)
    missing = [o.name for o in graph.output if o.name not in scope]
    if missing:
        raise FrontendError(f"subgraph output(s) {missing} are never produced", **ctx.where())  # type: ignore[arg-type]
    return [scope[o.name] for o in graph.output]


def lower_if(
    b: GraphBuilder,
    node: onnx.NodeProto,
    env: MutableMapping[str, Value],
    opset: int,
    lower: LowerNode,
) -> list[Value]:
    ctx = _Ctx(b, node, env, opset)
    cond = ctx.constant(0, "condition")
    assert cond is not None
    branch = "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"
    return _run_body(ctx, ctx.graph(branch), [], lower)


def lower_scan(
    b: GraphBuilder,
    node: onnx.NodeProto,
    env: MutableMapping[str, Value],
    opset: int,
    lower: LowerNode,
) -> list[Value]:
    ctx = _Ctx(b, node, env, opset)
    if opset < 9:
        raise UnsupportedOp("Scan before opset 9 (batched, with sequence_lens)", **ctx.where())  # type: ignore[arg-type]
    body = ctx.graph("body")
    m = ctx.int("num_scan_inputs", 0)
    values = [env[i] if i else None for i in node.input]
    n = len(values) - m
    states, scans = values[:n], values[n:]
    in_axes = ctx.ints("scan_input_axes", [0] * m)
    in_dirs = ctx.ints("scan_input_directions", [0] * m)
    k = len(body.output) - n
    out_axes = ctx.ints("scan_output_axes", [0] * k)
    out_dirs = ctx.ints("scan_output_directions", [0] * k)
    if any(v is None for v in scans) or not scans:
        raise FrontendError("Scan needs at least one scan input", **ctx.where())  # type: ignore[arg-type]
    axes = [a % v.ndim for a, v in zip(in_axes, scans, strict=True)]  # type: ignore[union-attr]
    lengths = {v.shape[a] for a, v in zip(axes, scans, strict=True)}  # type: ignore[union-attr]
    if len(lengths) != 1:
        raise FrontendError(f"scan inputs differ in length: {sorted(lengths)}", **ctx.where())  # type: ignore[arg-type]
    steps = lengths.pop()
    if steps > MAX_ITERATIONS:
        raise UnsupportedOp(
            f"a Scan of {steps} steps (unrolled up to {MAX_ITERATIONS})", **ctx.where()
        )  # type: ignore[arg-type]
    collected: list[list[Value]] = [[] for _ in range(k)]
    for t in range(steps):
        slices = []
        for v, a, d in zip(scans, axes, in_dirs, strict=True):
            assert v is not None
            i = steps - 1 - t if d else t
            spec = [(0, 1, dim) for dim in v.shape]
            spec[a] = (i, 1, 1)
            part = b.slice(v, spec)
            slices.append(b.reshape(part, tuple(dim for j, dim in enumerate(v.shape) if j != a)))
        outs = _run_body(ctx, body, [*states, *slices], lower)
        states = list(outs[:n])
        for j in range(k):
            collected[j].append(outs[n + j])
    results: list[Value] = [v for v in states if v is not None]
    for j in range(k):
        parts = collected[j][::-1] if out_dirs[j] else collected[j]
        results.append(_stack(b, parts, out_axes[j]))
    return results


def _stack(b: GraphBuilder, parts: list[Value], axis: int) -> Value:
    rank = parts[0].ndim + 1
    axis %= rank
    grown = [b.reshape(p, (*p.shape[:axis], 1, *p.shape[axis:])) for p in parts]
    return s.concat(b, grown, axis)


def lower_loop(
    b: GraphBuilder,
    node: onnx.NodeProto,
    env: MutableMapping[str, Value],
    opset: int,
    lower: LowerNode,
) -> list[Value]:
    ctx = _Ctx(b, node, env, opset)
    body = ctx.graph("body")
    trip = ctx.constant(0, "trip count")
    cond = ctx.constant(1, "loop condition")
    limit = None if trip is None else int(np.asarray(trip).reshape(-1)[0])
    going = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
    carried = [env[i] for i in node.input[2:]]
    n = len(carried)
    k = len(body.output) - 1 - n
    collected: list[list[Value]] = [[] for _ in range(k)]
    i = 0
    while going and (limit is None or i < limit):
        if i >= MAX_ITERATIONS:
            raise UnsupportedOp(f"a Loop of more than {MAX_ITERATIONS} iterations", **ctx.where())  # type: ignore[arg-type]
        index = b.const(np.array(i, np.int64))
        flag = b.const(np.array(True))
        outs = _run_body(ctx, body, [index, flag, *carried], lower)
        cond_v = b.const_value(outs[0])
        if cond_v is None:
            raise UnsupportedOp("a Loop whose condition depends on the data", **ctx.where())  # type: ignore[arg-type]
        going = bool(np.asarray(cond_v).reshape(-1)[0])
        carried = list(outs[1 : 1 + n])
        for j in range(k):
            collected[j].append(outs[1 + n + j])
        i += 1
    if k and i == 0:
        raise UnsupportedOp("a Loop that runs zero times and has scan outputs", **ctx.where())  # type: ignore[arg-type]
    return [*carried, *(_stack(b, parts, 0) for parts in collected)]


CONTROL = {"If": lower_if, "Scan": lower_scan, "Loop": lower_loop}
