"""The IR as an egglog term language, its analyses, and the encoder from a Graph.

One datatype, `Tensor`, with one constructor per IR op (egglog function names are the
constructor names, so a frozen e-graph reads back without the high-level layer).  Leaves:

- `Input(name)` and `Const(key)` are opaque, by id: their shapes and dtypes are set as
  facts when the graph is inserted, and a `Const`'s array stays in Python;
- `Fill(value, shape, dtype)` is a tensor with every element `value`: a one-element float
  constant (with the views that broadcast it) becomes a literal, so egglog can fold
  arithmetic on it with its own f64 primitives.

Op-specific arguments (shapes, permutations, axes, pad and slice specs) are `PyObject`
tuples, so the few rules that need shape arithmetic call plain Python functions (defined
here, pure) instead of spelling index arithmetic in egglog.  Tuples of ints hash by value,
so equal arguments are one e-graph value.

Three analyses run to saturation before every rewrite round (`ANALYSIS`): `shape` and
`dtype` of every e-class, `is_const` (the value depends on constants only, so the decoder
folds it into a weight) and `nonneg` (provably >= 0, which makes exp2(log2(x)) = x sound).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from egglog import (
    Bool,
    EGraph,
    Expr,
    PyObject,
    RewriteOrRule,
    String,
    StringLike,
    eq,
    f64,
    f64Like,
    function,
    i64,
    i64Like,
    relation,
    rule,
    ruleset,
    set_,
    union,
    var,
    vars_,
)
from egglog.egraph import Ruleset

from luminal.compiler.ir.graph import Graph
from luminal.compiler.ir.ops import Op


class Tensor(Expr):
    """A tensor-valued IR term."""


# ---- constructors: one per IR op ------------------------------------------------------
@function(egg_fn="Input")
def Input(name: StringLike) -> Tensor: ...


@function(egg_fn="Const")
def Const(key: StringLike) -> Tensor: ...


@function(egg_fn="Fill")
def Fill(value: f64Like, shape: PyObject, dtype: StringLike) -> Tensor: ...


@function(egg_fn="Iota")
def Iota(axis: i64Like, shape: PyObject, dtype: StringLike) -> Tensor: ...


@function(egg_fn="Exp2")
def Exp2(x: Tensor) -> Tensor: ...


@function(egg_fn="Log2")
def Log2(x: Tensor) -> Tensor: ...


@function(egg_fn="Sin")
def Sin(x: Tensor) -> Tensor: ...


@function(egg_fn="Sqrt")
def Sqrt(x: Tensor) -> Tensor: ...


@function(egg_fn="Recip")
def Recip(x: Tensor) -> Tensor: ...


@function(egg_fn="Cast")
def Cast(x: Tensor, dtype: StringLike) -> Tensor: ...


@function(egg_fn="Add")
def Add(a: Tensor, b: Tensor) -> Tensor: ...


@function(egg_fn="Mul")
def Mul(a: Tensor, b: Tensor) -> Tensor: ...


@function(egg_fn="Max")
def Max(a: Tensor, b: Tensor) -> Tensor: ...


@function(egg_fn="Mod")
def Mod(a: Tensor, b: Tensor) -> Tensor: ...


@function(egg_fn="Idiv")
def Idiv(a: Tensor, b: Tensor) -> Tensor: ...


@function(egg_fn="Lt")
def Lt(a: Tensor, b: Tensor) -> Tensor: ...


@function(egg_fn="Eq")
def Eq(a: Tensor, b: Tensor) -> Tensor: ...


@function(egg_fn="Where")
def Where(cond: Tensor, a: Tensor, b: Tensor) -> Tensor: ...


@function(egg_fn="Sum")
def Sum(x: Tensor, axes: PyObject) -> Tensor: ...


@function(egg_fn="Rmax")
def Rmax(x: Tensor, axes: PyObject) -> Tensor: ...


@function(egg_fn="Gather")
def Gather(data: Tensor, indices: Tensor, axis: i64Like) -> Tensor: ...


@function(egg_fn="Scatter")
def Scatter(data: Tensor, indices: Tensor, updates: Tensor, axis: i64Like) -> Tensor: ...


@function(egg_fn="Reshape")
def Reshape(x: Tensor, shape: PyObject) -> Tensor: ...


@function(egg_fn="Permute")
def Permute(x: Tensor, perm: PyObject) -> Tensor: ...


@function(egg_fn="Expand")
def Expand(x: Tensor, shape: PyObject) -> Tensor: ...


@function(egg_fn="Pad")
def Pad(x: Tensor, spec: PyObject) -> Tensor:
    """spec: the IR arg ((before, after) per axis, fill value)."""


@function(egg_fn="Slice")
def Slice(x: Tensor, spec: PyObject) -> Tensor:
    """spec: (IR arg ((start, step) per axis), result shape)."""


@function(egg_fn="Concat")
def Concat(a: Tensor, b: Tensor, axis: PyObject) -> Tensor:
    """a and b joined along `axis`; made by rules (horizontal fusion), decoded as pads + add."""


# ---- analyses -------------------------------------------------------------------------
@function(merge=lambda old, new: old, egg_fn="shape")
def shape(x: Tensor) -> PyObject: ...


@function(merge=lambda old, new: old, egg_fn="dtype")
def dtype(x: Tensor) -> String: ...


is_const = relation("is_const", Tensor, egg_fn="is_const")
nonneg = relation("nonneg", Tensor, egg_fn="nonneg")
#: made(e, family): a rule of `family` added an alternative to e-class e (for the report).
made = relation("made", Tensor, String, egg_fn="made")

UNARY_CTORS = {Op.EXP2: Exp2, Op.LOG2: Log2, Op.SIN: Sin, Op.SQRT: Sqrt, Op.RECIP: Recip}
BINARY_CTORS = {
    Op.ADD: Add,
    Op.MUL: Mul,
    Op.MAX: Max,
    Op.MOD: Mod,
    Op.IDIV: Idiv,
    Op.CMPLT: Lt,
    Op.CMPEQ: Eq,
}
FLOAT_DTYPES = ("f64", "f32", "f16", "bf16")


# Shape arithmetic, called from rules through PyObject.  Pure functions of tuples.
def reduce_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if k in axes else d for k, d in enumerate(shape))


def permute_shape(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape[p] for p in perm)


def pad_shape(shape: tuple[int, ...], spec: tuple) -> tuple[int, ...]:  # type: ignore[type-arg]
    widths, _ = spec
    return tuple(d + a + b for d, (a, b) in zip(shape, widths, strict=True))


def slice_shape(spec: tuple) -> tuple[int, ...]:  # type: ignore[type-arg]
    return tuple(spec[1])


def gather_shape(data: tuple[int, ...], indices: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return data[:axis] + indices + data[axis + 1 :]


def concat_shape(a: tuple[int, ...], b: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return (*a[:axis], a[axis] + b[axis], *a[axis + 1 :])


def _analysis_rules() -> list[RewriteOrRule]:
    a, b, c, e = vars_("a b c e", Tensor)
    s, t, u = vars_("s t u", PyObject)
    v = var("v", f64)
    n = var("n", String)
    k = var("k", i64)
    d, d2 = vars_("d d2", String)
    rules: list[RewriteOrRule] = []

    def both(pattern: Tensor, shape_of: PyObject, dtype_of: StringLike, *facts) -> None:  # type: ignore[no-untyped-def]
        rules.append(rule(eq(e).to(pattern), *facts).then(set_(shape(e)).to(shape_of)))
        rules.append(rule(eq(e).to(pattern), *facts).then(set_(dtype(e)).to(dtype_of)))

    both(Fill(v, s, d), s, d)
    both(Iota(k, s, d), s, d)
    for ctor in UNARY_CTORS.values():
        both(ctor(a), s, d, shape(a) == s, dtype(a) == d)
    both(Cast(a, d2), s, d2, shape(a) == s)
    for op, ctor in BINARY_CTORS.items():
        out = String("bool") if op in (Op.CMPLT, Op.CMPEQ) else d
        both(ctor(a, b), s, out, shape(a) == s, dtype(a) == d)
    both(Where(c, a, b), s, d, shape(a) == s, dtype(a) == d)
    for ctor in (Sum, Rmax):
        both(ctor(a, t), PyObject(reduce_shape)(s, t), d, shape(a) == s, dtype(a) == d)
    both(
        Gather(a, b, k),
        PyObject(gather_shape)(s, u, PyObject.from_int(k)),
        d,
        shape(a) == s,
        shape(b) == u,
        dtype(a) == d,
    )
    both(Scatter(a, b, c, k), s, d, shape(a) == s, dtype(a) == d)
    both(Reshape(a, t), t, d, dtype(a) == d)
    both(Expand(a, t), t, d, dtype(a) == d)
    both(Permute(a, t), PyObject(permute_shape)(s, t), d, shape(a) == s, dtype(a) == d)
    both(Pad(a, t), PyObject(pad_shape)(s, t), d, shape(a) == s, dtype(a) == d)
    both(Slice(a, t), PyObject(slice_shape)(t), d, dtype(a) == d)
    both(
        Concat(a, b, t),
        PyObject(concat_shape)(s, u, t),
        d,
        shape(a) == s,
        shape(b) == u,
        dtype(a) == d,
    )

    # is_const: built from constants only (never from inputs or iota), so foldable.
    rules.append(rule(eq(e).to(Const(n))).then(is_const(e)))
    rules.append(rule(eq(e).to(Fill(v, s, d))).then(is_const(e)))
    for ctor in (Reshape, Expand, Permute, Pad, Slice, Sum, Rmax):
        rules.append(rule(eq(e).to(ctor(a, t)), is_const(a)).then(is_const(e)))
    for ctor in UNARY_CTORS.values():
        rules.append(rule(eq(e).to(ctor(a)), is_const(a)).then(is_const(e)))
    rules.append(rule(eq(e).to(Cast(a, d)), is_const(a)).then(is_const(e)))
    for ctor in BINARY_CTORS.values():
        rules.append(rule(eq(e).to(ctor(a, b)), is_const(a), is_const(b)).then(is_const(e)))
    rules.append(rule(eq(e).to(Concat(a, b, t)), is_const(a), is_const(b)).then(is_const(e)))
    rules.append(
        rule(eq(e).to(Where(c, a, b)), is_const(c), is_const(a), is_const(b)).then(is_const(e))
    )

    # nonneg: provably >= 0 (or NaN) for every element.
    rules.append(rule(eq(e).to(Fill(v, s, d)), v >= 0.0).then(nonneg(e)))
    for x in (Exp2(a), Sqrt(a), Mul(a, a)):
        rules.append(rule(eq(e).to(x)).then(nonneg(e)))
    for ctor in (Reshape, Expand, Permute, Slice, Sum, Rmax):
        rules.append(rule(eq(e).to(ctor(a, t)), nonneg(a)).then(nonneg(e)))
    rules.append(rule(eq(e).to(Recip(a)), nonneg(a)).then(nonneg(e)))
    for ctor in (Add, Mul):
        rules.append(rule(eq(e).to(ctor(a, b)), nonneg(a), nonneg(b)).then(nonneg(e)))
    rules.append(rule(eq(e).to(Max(a, b)), nonneg(a)).then(nonneg(e)))
    rules.append(rule(eq(e).to(Max(a, b)), nonneg(b)).then(nonneg(e)))
    rules.append(rule(eq(e).to(Where(c, a, b)), nonneg(a), nonneg(b)).then(nonneg(e)))
    return rules


ANALYSIS = ruleset(*_analysis_rules(), name="analysis")


# ---- rules as data ----------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """A named rewrite (one or a few egglog rules that only make sense together), run as
    its own ruleset so its matches and time are reported separately."""

    name: str
    family: str
    rules: tuple[RewriteOrRule, ...]
    doc: str = ""

    @functools.cached_property
    def ruleset(self) -> Ruleset:
        return ruleset(*self.rules, name=f"{self.family}.{self.name}")


class Family:
    """Builds the rules of one family: `family.rule(name, doc, lhs >> rhs, ...)`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rules: list[Rule] = []

    def rewrite(self, lhs: Tensor, rhs: Tensor, *facts, tag: bool = True) -> RewriteOrRule:  # type: ignore[no-untyped-def]
        """lhs = rhs when `facts` hold; `tag` marks the e-class for the report (off for
        rules that only reorder, such as commutativity)."""
        e = var("e_", Tensor)
        actions = [union(e).with_(rhs)]
        if tag:
            actions.append(made(e, self.name))
        return rule(eq(e).to(lhs), *facts).then(*actions)

    def add(self, name: str, doc: str, *rules: RewriteOrRule) -> None:
        self.rules.append(Rule(name, self.name, tuple(rules), doc))


def py(fn) -> PyObject:  # type: ignore[no-untyped-def]
    """A Python function as an egglog value, callable inside rules."""
    return PyObject(fn)


def holds(obj: PyObject):  # type: ignore[no-untyped-def]
    """A rule fact: a PyObject predicate's result is true."""
    return obj.to_bool() == Bool(True)


# ---- encoding -------------------------------------------------------------------------
CTOR_NAME: dict[Op, str] = {
    Op.EXP2: "Exp2",
    Op.LOG2: "Log2",
    Op.SIN: "Sin",
    Op.SQRT: "Sqrt",
    Op.RECIP: "Recip",
    Op.ADD: "Add",
    Op.MUL: "Mul",
    Op.MAX: "Max",
    Op.MOD: "Mod",
    Op.IDIV: "Idiv",
    Op.CMPLT: "Lt",
    Op.CMPEQ: "Eq",
    Op.CAST: "Cast",
    Op.WHERE: "Where",
    Op.SUM: "Sum",
    Op.RMAX: "Rmax",
    Op.GATHER: "Gather",
    Op.SCATTER: "Scatter",
    Op.RESHAPE: "Reshape",
    Op.PERMUTE: "Permute",
    Op.EXPAND: "Expand",
    Op.PAD: "Pad",
    Op.SLICE: "Slice",
    Op.IOTA: "Iota",
    Op.INPUT: "Input",
}


@dataclass
class Encoding:
    """A graph inserted into a fresh e-graph.  Node i is the let binding `n<i>`, output k
    is `__out<k>`; `original` lists (node, constructor, operand nodes) so the report can
    tell extracted e-nodes that were already in the graph from rewritten ones."""

    egraph: EGraph
    graph: Graph
    roots: dict[str, str]  # let name -> output name
    original: list[tuple[int, str, tuple[int, ...]]] = field(default_factory=list)


def is_scalar_fill(graph: Graph, index: int) -> bool:
    node = graph.nodes[index]
    if node.op is not Op.CONST or not node.dtype.is_float:
        return False
    value = graph.consts[node.arg]
    return value.size == 1 and bool(np.isfinite(value).all())


def term_for(node_op: Op, arg, srcs: list[Tensor], shp: tuple[int, ...], dt: str) -> Tensor:  # type: ignore[no-untyped-def]
    """The constructor call for one IR node over already-built operand terms."""
    if node_op in UNARY_CTORS:
        return UNARY_CTORS[node_op](srcs[0])
    if node_op is Op.CAST:
        return Cast(srcs[0], dt)
    if node_op in BINARY_CTORS:
        return BINARY_CTORS[node_op](srcs[0], srcs[1])
    if node_op is Op.WHERE:
        return Where(srcs[0], srcs[1], srcs[2])
    if node_op is Op.SUM:
        return Sum(srcs[0], PyObject(tuple(arg)))
    if node_op is Op.RMAX:
        return Rmax(srcs[0], PyObject(tuple(arg)))
    if node_op is Op.GATHER:
        return Gather(srcs[0], srcs[1], int(arg))
    if node_op is Op.SCATTER:
        return Scatter(srcs[0], srcs[1], srcs[2], int(arg))
    if node_op is Op.RESHAPE:
        return Reshape(srcs[0], PyObject(tuple(arg)))
    if node_op is Op.PERMUTE:
        return Permute(srcs[0], PyObject(tuple(arg)))
    if node_op is Op.EXPAND:
        return Expand(srcs[0], PyObject(tuple(arg)))
    if node_op is Op.PAD:
        return Pad(srcs[0], PyObject(arg))
    if node_op is Op.SLICE:
        return Slice(srcs[0], PyObject((tuple(arg), shp)))
    if node_op is Op.IOTA:
        return Iota(int(arg), PyObject(shp), dt)
    raise ValueError(f"no term for {node_op}")


def encode(
    graph: Graph, leaf_names: Mapping[int, str] | None = None, keep: tuple[int, ...] = ()
) -> Encoding:
    """Insert `graph` into a new e-graph.  `leaf_names` turns nodes into opaque Input
    leaves (block outputs; what is behind them is not inserted); `keep` nodes stay
    extractable even if no output needs them (block entries and parameters)."""
    egraph = EGraph()
    leaf_names = leaf_names or {}
    terms: list[Tensor | None] = [None] * len(graph.nodes)
    facts = []
    original = []
    needed = _needed(graph, leaf_names, keep)
    for i, node in enumerate(graph.nodes):
        if not needed[i]:
            continue
        dt = node.dtype.value
        srcs: tuple[int, ...] = ()
        if i in leaf_names or node.op is Op.INPUT:
            name = leaf_names.get(i, node.arg)
            term: Tensor = Input(name)
            ctor = "Input"
            facts += [set_(shape(term)).to(PyObject(node.shape)), set_(dtype(term)).to(dt)]
        elif node.op is Op.CONST:
            if is_scalar_fill(graph, i):
                value = float(np.asarray(graph.consts[node.arg], dtype=np.float64).reshape(-1)[0])
                term, ctor = Fill(value, PyObject(node.shape), dt), "Fill"
            else:
                term, ctor = Const(node.arg), "Const"
                facts += [set_(shape(term)).to(PyObject(node.shape)), set_(dtype(term)).to(dt)]
        else:
            srcs = node.src
            operands = [terms[s] for s in srcs]
            term = term_for(node.op, node.arg, operands, node.shape, dt)  # type: ignore[arg-type]
            ctor = CTOR_NAME[node.op]
        # Bind every node so the Python term stays a reference, not a growing tree.
        terms[i] = egraph.let(f"n{i}", term)
        original.append((i, ctor, srcs))
    roots = {}
    for k, (name, i) in enumerate(graph.outputs):
        egraph.let(f"__out{k}", terms[i])  # type: ignore[arg-type]
        roots[f"__out{k}"] = name
    if facts:
        egraph.register(*facts)
    return Encoding(egraph, graph, roots, original)


def _needed(graph: Graph, leaves: Mapping[int, str], keep: tuple[int, ...]) -> list[bool]:
    needed = [False] * len(graph.nodes)
    for i in (*(i for _, i in graph.outputs), *keep):
        needed[i] = True
    for i in range(len(graph.nodes) - 1, -1, -1):
        if needed[i] and i not in leaves:
            for s in graph.nodes[i].src:
                needed[s] = True
    return needed
