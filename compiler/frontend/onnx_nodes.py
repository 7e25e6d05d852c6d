"""Lower one ONNX node into the IR and record its outcome (supported, refused, not reached).

    lower_node: an input blocked by a refused node?   -> not reached, outputs blocked
                If / Loop / Scan                      -> onnx_control; the body's nodes NESTED
                a lowering in OPS / DOMAIN_OPS        -> NodeContext -> outputs
                a model-local function                -> its body's nodes NESTED
                the op schema's function body         -> its nodes HIDDEN
                none of these                         -> refused

`Scope` says what a refusal does.  TOP: the node's outputs are blocked and lowering goes on
with the next node.  NESTED (a node of a subgraph or of a model-local function, both part
of the model): recorded under its own op, then the enclosing node is abandoned as not
reached.  HIDDEN (a node of a schema's function body, an implementation detail): nothing is
recorded; the error rises to the node that was expanded.  One dispatch decides both what
compiles and what `inspect` reports.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

import onnx
from onnx import AttributeProto, helper

from luminal.compiler.frontend import onnx_control, onnx_functions
from luminal.compiler.frontend.coverage import OpKind, Reason, Recorder, Refusal
from luminal.compiler.frontend.onnx_ops import DOMAIN_OPS, OPS, NodeContext
from luminal.compiler.frontend.onnx_ops.context import DataDependent
from luminal.compiler.frontend.onnx_precision import ValueTypes, widen
from luminal.compiler.frontend.onnx_precision import narrow as narrow_result
from luminal.compiler.ir import GraphBuilder, Value
from luminal.compiler.ir.dtypes import ONNX_DTYPES
from luminal.errors import FrontendError, GraphError, UnsupportedOp

ONNX_TYPE_OF = {dtype: code for code, dtype in ONNX_DTYPES.items()}
MAX_DEPTH = 8  # nested function expansions
_KNOWN_DOMAINS = {domain for domain, _ in DOMAIN_OPS}


class Scope(enum.Enum):
    TOP = "top"
    NESTED = "nested"
    HIDDEN = "hidden"


@dataclass(frozen=True)
class Run:
    """What every node of one model's lowering shares."""

    b: GraphBuilder
    types: ValueTypes
    functions: Mapping[tuple[str, str], onnx.FunctionProto]  # the model's own, by (domain, name)
    recorder: Recorder
    max_opset: int


class _Abandoned(Exception):
    """A node inside a subgraph or local function was refused: give up the enclosing node."""

    def __init__(self, by: str) -> None:
        super().__init__(by)
        self.by = by


def node_name(node: onnx.NodeProto) -> str:
    return node.name or (node.output[0] if node.output else "?")


def kind_of(node: onnx.NodeProto, opset: int, imports: Mapping[str, int]) -> OpKind:
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    return OpKind(domain, node.op_type, opset if not domain else imports.get(domain))


def census(
    model: onnx.ModelProto, opset: int, imports: Mapping[str, int]
) -> dict[OpKind, list[str]]:
    """Every node of the model by op kind: the graph, its subgraphs, its local functions."""
    found: dict[OpKind, list[str]] = {}

    def walk(nodes: object, opset: int, imports: Mapping[str, int]) -> None:
        for n in nodes:  # type: ignore[attr-defined]
            found.setdefault(kind_of(n, opset, imports), []).append(node_name(n))
            for a in n.attribute:
                if a.type == AttributeProto.GRAPH:
                    walk(a.g.node, opset, imports)
                elif a.type == AttributeProto.GRAPHS:
                    for g in a.graphs:
                        walk(g.node, opset, imports)

    walk(model.graph.node, opset, imports)
    for function in model.functions:
        scope = {**imports, **{o.domain or "": int(o.version) for o in function.opset_import}}
        walk(function.node, scope.get("", opset), scope)
    return found


def lower_node(
    run: Run,
    node: onnx.NodeProto,
    env: dict[str, Value],
    opset: int,
    imports: Mapping[str, int],
    scope: Scope = Scope.TOP,
    depth: int = 0,
) -> None:
    rec = run.recorder
    name = node_name(node)
    kind = kind_of(node, opset, imports)
    by = None if scope is Scope.HIDDEN else rec.blocker(node.input)
    if by is None:
        try:
            _lower(run, node, env, opset, imports, scope, depth)
        except _Abandoned as inner:
            by = inner.by
            rec.not_reached(kind, name, node.output, by, f"its body has refused {by}")
        except FrontendError as err:
            if scope is Scope.HIDDEN or not rec.takes(err):
                raise
            rec.refused(kind, name, node.output, err)
            by = f"node '{name}'"
        else:
            if scope is not Scope.HIDDEN:
                rec.supported(kind, name)
            return
    else:
        rec.not_reached(kind, name, node.output, by)
    if scope is Scope.NESTED:
        raise _Abandoned(by)


def _lower(
    run: Run,
    node: onnx.NodeProto,
    env: dict[str, Value],
    opset: int,
    imports: Mapping[str, int],
    scope: Scope,
    depth: int,
) -> None:
    b = run.b
    name = node_name(node)
    where = {"op": node.op_type, "node": name, "opset": opset}
    standard = node.domain in ("", "ai.onnx")
    if standard and node.op_type in onnx_control.CONTROL:
        inner_scope = Scope.HIDDEN if scope is Scope.HIDDEN else Scope.NESTED

        def lower_inner(inner: onnx.NodeProto, scope_env: dict[str, Value]) -> None:
            lower_node(run, inner, scope_env, opset, imports, inner_scope, depth + 1)

        outs = onnx_control.CONTROL[node.op_type](b, node, env, opset, lower_inner)  # type: ignore[arg-type]
        for out_name, value in zip(node.output, outs, strict=False):
            if out_name:
                env[out_name] = value
        return
    lowering = OPS.get(node.op_type) if standard else DOMAIN_OPS.get((node.domain, node.op_type))
    if lowering is None:
        if depth > MAX_DEPTH or not _lower_function(run, node, env, opset, imports, scope, depth):
            if standard or node.domain in _KNOWN_DOMAINS:
                raise Refusal(Reason.NO_LOWERING, "not supported", **where)
            raise Refusal(
                Reason.CUSTOM_DOMAIN, f"custom domain '{node.domain}' is not supported", **where
            )
        return
    inputs = []
    for i in node.input:
        if i and i not in env:
            raise FrontendError(f"input '{i}' is used before it is produced", **where)  # type: ignore[arg-type]
        inputs.append(env[i] if i else None)
    original = [None if v is None else v.dtype for v in inputs]
    inputs, narrow = widen(b, inputs)
    ctx = NodeContext(
        b, node, inputs, opset, narrow=next(iter(narrow)) if len(narrow) == 1 else None
    )
    try:
        outs = list(lowering(ctx))
        if narrow:
            outs = [
                v if v is None else narrow_result(b, node, o, v, original, run.types)
                for o, v in zip(node.output, outs, strict=False)
            ]
    except GraphError as err:
        raise FrontendError(str(err), **where) from None  # type: ignore[arg-type]
    unread = ctx.unread_attrs()
    if unread:
        raise Refusal(Reason.ATTRIBUTES, f"attribute(s) {unread} not supported", **where)
    for out_name, value in zip(node.output, outs, strict=False):
        if out_name and value is not None:
            env[out_name] = value
    missing = [
        o
        for o, v in zip(node.output, outs + [None] * len(node.output), strict=False)
        if o and v is None
    ]
    if missing:
        raise Refusal(Reason.OUTPUTS, f"output(s) {missing} not supported", **where)


def _lower_function(
    run: Run,
    node: onnx.NodeProto,
    env: dict[str, Value],
    opset: int,
    imports: Mapping[str, int],
    scope: Scope,
    depth: int,
) -> bool:
    """Lower `node` through the model's function of that name, else its schema's function
    body; False if there is neither."""
    standard = node.domain in ("", "ai.onnx")
    local = run.functions.get((node.domain, node.op_type))
    if local is not None:
        body, body_imports = onnx_functions.local_body(node, local)
        body_scope = Scope.HIDDEN if scope is Scope.HIDDEN else Scope.NESTED
        version = imports.get(node.domain, opset)
        inner_default = opset
    else:
        version = opset if standard else imports.get(node.domain)  # type: ignore[assignment]
        if version is None:
            return False
        input_types = [
            helper.make_tensor_type_proto(ONNX_TYPE_OF[env[i].dtype], env[i].shape)
            if i and i in env
            else None
            for i in node.input
        ]
        found = onnx_functions.function_body(node, version, input_types)
        if found is None:
            return False
        body, body_imports = found
        body_scope = Scope.HIDDEN
        inner_default = version if standard else run.max_opset
    inner_imports = {**imports, **body_imports}
    inner_opset = body_imports.get("", inner_default)
    name = node_name(node)
    for inner in body:
        try:
            lower_node(run, inner, env, inner_opset, inner_imports, body_scope, depth + 1)
        except DataDependent as err:  # name the node's inputs it derives from
            outer = onnx_functions.sources(body, err.values, set(node.input))
            raise DataDependent(
                str(err), values=tuple(outer), op=node.op_type, node=name, opset=version
            ) from None
        except UnsupportedOp as err:  # the body's node names are made up: leave them out
            inside = FrontendError(err.message, op=err.op, opset=err.opset)
            raise Refusal(
                Reason.FUNCTION_BODY,
                f"in its ONNX function body: {inside}",
                op=node.op_type,
                node=name,
                opset=version,
            ) from None
        except FrontendError as err:
            raise FrontendError(
                f"in its ONNX function body: {err}", op=node.op_type, node=name, opset=version
            ) from None
    return True
