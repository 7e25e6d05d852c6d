"""From a chosen term back to an IR graph, through GraphBuilder.

GraphBuilder re-infers every shape and dtype, so a wrong rule fails here, loudly, and the
caller falls back to the original graph; it also shares identical nodes.  Subterms built
from constants only are folded into weights (`fold.py`) instead of becoming ops.

Provenance survives the rewrite: a node decoded from an e-class carries the source-node
names of the original nodes merged into that class (`origins`); a class a rule made
(no original node in it) carries those of the nearest class above it that has some.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from luminal.compiler.ir.builder import GraphBuilder, Value
from luminal.compiler.ir.dtypes import DType
from luminal.compiler.ir.ops import Op
from luminal.compiler.search.choice import Choice
from luminal.compiler.search.fold import Folded, NotFoldable, fold_node, leaf
from luminal.compiler.search.language import Kind, Term
from luminal.compiler.search.snapshot import EGraphView, ENode
from luminal.errors import GraphError


class Decoder:
    """Rebuilds chosen terms of one e-graph into a shared GraphBuilder.  Input leaves
    resolve through `resolve` (graph inputs, block entries, block outputs: built on
    demand), Const leaves through `consts` (key -> array)."""

    def __init__(
        self,
        builder: GraphBuilder,
        view: EGraphView,
        choice: Choice,
        resolve: Callable[[str], Value | Folded],
        consts: Mapping[str, np.ndarray],
        origins: Mapping[int, tuple[str, ...]] | None = None,
    ) -> None:
        self.b = builder
        self.view = view
        self.choice = choice
        self.resolve = resolve
        self.consts = consts
        self.memo: dict[int, Value | Folded] = {}
        self.origins: dict[int, tuple[str, ...]] = dict(origins or {})

    def let(self, name: str) -> Value | Folded:
        return self.value(self.view.lets[name])

    def value(self, root: int) -> Value | Folded:
        memo, view = self.memo, self.view
        stack = [(root, False)]
        while stack:
            cls, ready = stack.pop()
            if cls in memo:
                continue
            if cls not in self.choice.best:
                raise GraphError(f"e-class {cls} has no extractable term")
            node = view.nodes[self.choice.best[cls]]
            names = self.origins.get(cls, ())
            if not ready:
                stack.append((cls, True))
                for c in node.children:
                    if c not in memo:
                        stack.append((c, False))
                        if names and c not in self.origins:
                            self.origins[c] = names  # a rule's class: its user's names
                continue
            with self.b.origin(names):
                memo[cls] = self._build(cls, node, [memo[c] for c in node.children])
        return memo[root]

    def emit(self, x: Value | Folded) -> Value:
        if isinstance(x, Value):
            return x
        v = self.b.const(np.require(x.small, requirements="C"), name=x.name)
        return self.b.expand(v, x.shape) if tuple(x.small.shape) != x.shape else v

    def _build(self, cls: int, node: ENode, kids: list[Value | Folded]) -> Value | Folded:
        op, p = node.op, node.params
        if op is Term.INPUT:
            return self.resolve(p[0])  # type: ignore[arg-type]
        if op is Term.CONST:
            (key,) = p
            return leaf(self.consts[key], key)  # type: ignore[index]
        if op is Term.FILL:
            value, shp, dt = p
            return Folded(np.full((1,) * len(shp), value, DType(dt).np), tuple(shp))  # type: ignore[arg-type]
        if op is Term.IOTA:
            axis, shp, dt = p
            return self.b.iota(shp, axis, DType(dt))  # type: ignore[arg-type]
        if kids and all(isinstance(k, Folded) for k in kids):
            shp, dt = self.view.shapes.get(cls), self.view.dtypes.get(cls)
            if shp is not None and dt is not None:
                try:
                    with np.errstate(all="ignore"):
                        return fold_node(op, p, kids, tuple(shp), DType(dt))  # type: ignore[arg-type]
                except NotFoldable:
                    pass
        xs = [self.emit(k) for k in kids]
        return self._emit_op(op, p, xs)

    def _emit_op(self, op: Term, p: tuple[object, ...], xs: list[Value]) -> Value:
        b = self.b
        if op is Term.CAST:
            return b.cast(xs[0], DType(p[0]))  # type: ignore[arg-type]
        if op.kind is Kind.UNARY:
            return b.unary(op.op, xs[0])  # type: ignore[arg-type]
        if op.kind is Kind.BINARY:
            return b.binary(op.op, xs[0], xs[1])  # type: ignore[arg-type]
        if op is Term.WHERE:
            return b.where(*xs)
        if op.kind is Kind.REDUCE:
            return b.reduce(op.op, xs[0], p[0])  # type: ignore[arg-type]
        if op is Term.GATHER:
            return b.gather(xs[0], xs[1], p[0])  # type: ignore[arg-type]
        if op is Term.SCATTER:
            return b.scatter(xs[0], xs[1], xs[2], p[0])  # type: ignore[arg-type]
        if op is Term.RESHAPE:
            return b.reshape(xs[0], p[0])  # type: ignore[arg-type]
        if op is Term.PERMUTE:
            return b.permute(xs[0], p[0])  # type: ignore[arg-type]
        if op is Term.EXPAND:
            return b.expand(xs[0], p[0])  # type: ignore[arg-type]
        if op is Term.PAD:
            widths, fill = p[0]  # type: ignore[misc]
            return b.pad(xs[0], widths, fill)
        if op is Term.SLICE:
            arg, shp = p[0]  # type: ignore[misc]
            return b.slice(
                xs[0], [(start, step, n) for (start, step), n in zip(arg, shp, strict=True)]
            )
        if op is Term.CONCAT:
            (axis,) = p
            x, y = xs
            before = [(0, 0)] * x.ndim
            after = list(before)
            after[axis] = (0, y.shape[axis])  # type: ignore[index]
            before[axis] = (x.shape[axis], 0)  # type: ignore[index]
            return b.binary(Op.ADD, b.pad(x, after, 0), b.pad(y, before, 0))
        raise GraphError(f"cannot decode e-node {op.egg_name}")
