"""Expand an ONNX node into the function body its op schema (or the model) defines.

Many newer ONNX ops (CenterCropPad, SpaceToDepth, the window functions, CausalConvWithState,
FlexAttention, ...) are *functions*: the standard defines them as a graph of simpler ops,
either fixed or built for the node at hand (a context-dependent function).  An op without
a lowering of its own is lowered through that body: the body's inputs and outputs are
renamed to the node's, its internal values get a unique prefix, and attribute references
are replaced by the node's attributes (or the schema's defaults).  A function the model
defines itself (`ModelProto.functions`, as exporters write for custom modules) is expanded
the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import onnx
from onnx import AttributeProto, FunctionProto, NodeProto, TypeProto

_COUNTER = itertools.count()


def function_body(
    node: NodeProto, version: int, input_types: Sequence[TypeProto | None]
) -> tuple[list[NodeProto], dict[str, int]] | None:
    """(the body's nodes, wired to `node`'s inputs and outputs; the body's opset imports)
    or None when the op's schema defines no function for this opset."""
    try:
        schema = onnx.defs.get_schema(node.op_type, version, domain=node.domain)
    except onnx.defs.SchemaError:
        return None
    proto = _pick(schema, node, version, input_types)
    if proto is None:
        return None
    attrs = {a.name: a for a in node.attribute}
    for name, spec in schema.attributes.items():
        if name not in attrs and spec.default_value and spec.default_value.type:
            attrs[name] = spec.default_value
    return _expand(node, proto, attrs)


def local_body(node: NodeProto, function: FunctionProto) -> tuple[list[NodeProto], dict[str, int]]:
    """`function_body` for a function the model defines itself (`ModelProto.functions`)."""
    attrs = {a.name: a for a in node.attribute}
    for default in function.attribute_proto:
        attrs.setdefault(default.name, default)
    return _expand(node, function, attrs)


def _expand(
    node: NodeProto, proto: FunctionProto, attrs: Mapping[str, AttributeProto]
) -> tuple[list[NodeProto], dict[str, int]]:
    prefix = f"{node.op_type}_{next(_COUNTER)}__"
    names: dict[str, str] = {}
    for k, formal in enumerate(proto.input):
        names[formal] = node.input[k] if k < len(node.input) else ""
    for k, formal in enumerate(proto.output):
        if k < len(node.output) and node.output[k]:
            names[formal] = node.output[k]

    def rename(name: str) -> str:
        if name in names:
            return names[name]
        return "" if name == "" else prefix + name

    nodes = [_rewire(n, rename, attrs, prefix) for n in proto.node]
    imports = {o.domain or "": int(o.version) for o in proto.opset_import}
    return nodes, imports


def _pick(
    schema: onnx.defs.OpSchema,
    node: NodeProto,
    version: int,
    input_types: Sequence[TypeProto | None],
) -> FunctionProto | None:
    """The body for the newest function opset not after `version`."""
    fixed = [v for v in schema.function_opset_versions if v <= version]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= version]
    proto = FunctionProto()
    if dependent and (not fixed or max(dependent) >= max(fixed)):
        types = [(t or TypeProto()).SerializeToString() for t in input_types]
        try:
            text = schema.get_context_dependent_function_with_opset_version(
                max(dependent), node.SerializeToString(), types
            )
        except Exception:  # the builder rejects this node (an unsupported input type)
            return None
        proto.ParseFromString(text)
        return proto
    if fixed:
        proto.ParseFromString(schema.get_function_with_opset_version(max(fixed)))
        return proto
    return None


def _rewire(node: NodeProto, rename, attrs: Mapping[str, AttributeProto], prefix: str) -> NodeProto:  # type: ignore[no-untyped-def]
    out = NodeProto()
    out.CopyFrom(node)
    del out.input[:]
    out.input.extend(rename(i) for i in node.input)
    del out.output[:]
    out.output.extend(rename(o) for o in node.output)
    out.name = prefix + (node.name or (node.output[0] if node.output else node.op_type))
    kept = []
    for a in node.attribute:
        if a.ref_attr_name:
            if a.ref_attr_name not in attrs:
                continue  # an optional attribute the caller left out
            ref = AttributeProto()
            ref.CopyFrom(attrs[a.ref_attr_name])
            ref.name = a.name
            kept.append(ref)
        elif a.type == AttributeProto.GRAPH:
            graph = AttributeProto()
            graph.CopyFrom(a)
            local = {v.name for v in (*a.g.input, *a.g.output, *a.g.initializer)}
            local |= {o for n in a.g.node for o in n.output}

            def inner(name: str, local=local) -> str:  # type: ignore[no-untyped-def]
                return name if name in local else rename(name)

            del graph.g.node[:]
            graph.g.node.extend(_rewire(n, inner, attrs, prefix) for n in a.g.node)
            kept.append(graph)
        else:
            kept.append(a)
    del out.attribute[:]
    out.attribute.extend(kept)
    return out


def sources(body: Sequence[NodeProto], values: Sequence[str], outer: set[str]) -> set[str]:
    """The names in `outer` (the calling node's inputs) that `values` derive from."""
    producer = {o: n for n in all_nodes(body) for o in n.output}
    found, seen, stack = set(), set(), list(values)
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in outer:
            found.add(v)
        elif v in producer:
            stack.extend(i for i in producer[v].input if i)
    return found


def all_nodes(nodes: Sequence[NodeProto]) -> list[NodeProto]:
    """`nodes` and, recursively, the nodes of their subgraphs (If, Loop, Scan bodies)."""
    out = []
    for n in nodes:
        out.append(n)
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                out.extend(all_nodes(a.g.node))
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    out.extend(all_nodes(g.node))
    return out
