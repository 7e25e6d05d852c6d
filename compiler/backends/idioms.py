"""Composite functions the frontends spell in IR primitives, recognized so that a backend
can emit the one instruction that computes them.

    Idioms(graph).match(i) -> IdiomMatch(idiom, x) | None

The IR has no rounding op: `compose.special.round_half_even` and `floor` build rounding
from a truncating cast, compares and selects (about 20 nodes, one `fmod`), and every
QuantizeLinear, DynamicQuantizeLinear and requantizing QLinear op rounds that way.  In C
that chain costs tens of cycles an element and never vectorizes; `rintf` (round to nearest,
ties to even, in the default rounding mode luminal's code never changes) and `floorf` are
one `vroundps` on any x86-64 with SSE4.1, and GCC vectorizes them.

The pattern of each idiom is its own builder: the function is applied to a fresh input of
the candidate's shape and dtype, and the candidate's subgraph must equal the result node
for node (ops, dtypes, shapes, arguments, constant values), with the fresh input standing
for one node `x` of the graph.  So a change to the composite changes its pattern with it,
and a subgraph that only resembles it (rewritten by the search, say) is not matched and
keeps its primitive code, which computes the same value.  One difference, in the sign of
a zero only: `rintf(-0.4)` is -0.0, as numpy's `rint` and ONNX's Round give it, where the
primitive chain gives +0.0; the values compare equal.

A clamp is matched by its structure instead, since its bounds are any two constants:
`compose.math.clip` is MAX(x, lo) then the minimum WHERE(hi < m, hi, m).  In C the two
selects in a row compile to a branch on the sign of x for a ReLU6 (the path where the max
gives `lo` is threaded past the minimum): taken half the time on a convolution's output,
that branch made mobilenet_v2's first convolution 1.45 ms instead of 0.3.  `Clamp` lets a
backend compute both bounds without it.

A logistic tail, 1 / (1 + 2^t), is matched by its structure too (`Logistic`): the search
rewrites `compose.math.sigmoid`'s -x * log2(e) into one product, so the template no
longer matches.  A SiLU is most of an EfficientNet's elementwise work, and where
`lum_exp2f` must give 2^t to 2 ulps down to the subnormals, 1 + 2^t needs none of that
(`cexpr`'s `lum_logistic2f`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from luminal.compiler.ir import DType, Graph, GraphBuilder, Op, Value
from luminal.compiler.ir.graph import Node


class Idiom(enum.Enum):
    ROUND_HALF_EVEN = "round_half_even"
    FLOOR = "floor"


def _builders() -> dict[Idiom, Callable[[GraphBuilder, Value], Value]]:
    from luminal.compiler.frontend.compose import special

    return {Idiom.ROUND_HALF_EVEN: special.round_half_even, Idiom.FLOOR: special.floor}


@dataclass(frozen=True)
class IdiomMatch:
    idiom: Idiom
    x: int  # the graph node the composite is applied to


@dataclass(frozen=True)
class Clamp:
    """WHERE(hi < MAX(x, lo), hi, MAX(x, lo)) with constants lo < hi: x within [lo, hi],
    NaN staying NaN."""

    x: int
    lo: float
    hi: float


@dataclass(frozen=True)
class Logistic:
    """RECIP(ADD(1, EXP2(t))) in f32: 1 / (1 + 2^t), what `compose.math.sigmoid` leaves
    once the search has folded its negation into the log2(e) factor (`tanh` has it too).
    `inner`: the ADD and the EXP2, which the one function computes as well."""

    t: int
    inner: tuple[int, int]


@dataclass
class Idioms:
    """Matches against one graph; templates are built once per (idiom, shape, dtype)."""

    graph: Graph
    _templates: dict[tuple[Idiom, tuple[int, ...], DType], tuple[Graph, int]] = field(
        default_factory=dict
    )

    def match(self, i: int) -> IdiomMatch | None:
        """The idiom node `i` computes, and what it is applied to, else None."""
        node = self.graph.nodes[i]
        # both composites end in WHERE(|x| < 2^mantissa, rounded, x)
        if node.op is not Op.WHERE or node.dtype not in (DType.F32, DType.F64):
            return None
        for idiom in Idiom:
            template, out = self._template(idiom, node.shape, node.dtype)
            bound: dict[str, int] = {}
            if _same(self.graph, i, template, out, bound, {}):
                return IdiomMatch(idiom, bound["x"])
        return None

    def clamp(self, i: int) -> Clamp | None:
        """The clamp node `i` computes (an f32 clip with both bounds constant), else None."""
        g = self.graph
        node = g.nodes[i]
        if node.op is not Op.WHERE or node.dtype is not DType.F32:
            return None
        c, hi_node, m = node.src
        cmp, mx = g.nodes[c], g.nodes[m]
        if cmp.op is not Op.CMPLT or cmp.src != (hi_node, m) or mx.op is not Op.MAX:
            return None
        hi = _scalar(g, hi_node)
        for x, lo_node in (mx.src, mx.src[::-1]):
            lo = _scalar(g, lo_node)
            if lo is not None and hi is not None and lo < hi:  # False for a NaN bound
                return Clamp(x, lo, hi)
        return None

    def logistic(self, i: int) -> Logistic | None:
        """The logistic tail node `i` computes, else None."""
        g = self.graph
        node = g.nodes[i]
        if node.op is not Op.RECIP or node.dtype is not DType.F32:
            return None
        add = g.nodes[node.src[0]]
        if add.op is not Op.ADD or add.dtype is not DType.F32:
            return None
        for one, e in (add.src, add.src[::-1]):
            exp2 = g.nodes[e]
            if exp2.op is Op.EXP2 and exp2.shape == add.shape and _scalar(g, one) == 1.0:
                return Logistic(exp2.src[0], (node.src[0], e))
        return None

    def _template(self, idiom: Idiom, shape: tuple[int, ...], dtype: DType) -> tuple[Graph, int]:
        key = (idiom, shape, dtype)
        if key not in self._templates:
            b = GraphBuilder()
            y = _builders()[idiom](b, b.input("x", shape, dtype))
            g = b.build({"y": y})
            self._templates[key] = (g, g.outputs[0][1])
        return self._templates[key]


def _same(
    g: Graph, i: int, t: Graph, j: int, bound: dict[str, int], seen: dict[tuple[int, int], bool]
) -> bool:
    """Whether node `i` of `g` computes what node `j` of the template `t` does, the
    template's one input bound to a single node of `g`."""
    key = (i, j)
    if key in seen:
        return seen[key]
    tn = t.nodes[j]
    if tn.op is Op.INPUT:
        ok = bound.setdefault("x", i) == i and g.nodes[i].shape == tn.shape
    else:
        ok = _node_alike(g, g.nodes[i], t, tn) and all(
            _same(g, a, t, b, bound, seen) for a, b in zip(g.nodes[i].src, tn.src, strict=True)
        )
    seen[key] = ok
    return ok


def _scalar(g: Graph, i: int) -> float | None:
    """The one value of a constant broadcast through views, else None."""
    node = g.nodes[i]
    while node.op in (Op.RESHAPE, Op.EXPAND, Op.PERMUTE):
        node = g.nodes[node.src[0]]
    if node.op is not Op.CONST:
        return None
    a = np.asarray(g.consts[node.arg])
    return float(a.reshape(-1)[0]) if a.size == 1 else None


def _node_alike(g: Graph, n: Node, t: Graph, tn: Node) -> bool:
    if (n.op, n.dtype, n.shape, len(n.src)) != (tn.op, tn.dtype, tn.shape, len(tn.src)):
        return False
    if n.op is Op.CONST:
        a, b = np.asarray(g.consts[n.arg]), np.asarray(t.consts[tn.arg])
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return bool(n.arg == tn.arg)


__all__ = ["Clamp", "Idiom", "IdiomMatch", "Idioms", "Logistic"]
