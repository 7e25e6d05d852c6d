"""Op coverage: which of a model's op kinds the frontend lowers, and why not the others.

The frontend's own lowering decides (there is no second table of what is supported): it
lowers node by node with a `Recorder`, which notes each node's outcome instead of stopping
at the first refusal.  A refused node's outputs are *blocked*, so the nodes that need them
are "not reached" rather than falsely unsupported::

    lowering --(NodeOutcome per node)--> Recorder --build_coverage(census)--> Coverage
                                             |                                  |
                              raise_if_refused (compile)                 inspect's table/JSON

`compile` calls `Recorder.raise_if_refused`: one refusal keeps its own error; several
become one `UnsupportedOp` naming every op kind and node.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from luminal.errors import FrontendError, UnsupportedOp

#: node names kept per op kind and per finding
FIRST_NODES = 3


class OpStatus(enum.Enum):
    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    INVALID = "invalid"  # the frontend lowers this op, but this node is malformed
    NOT_REACHED = "not reached"  # every node needs a value a refused node would compute


class Reason(enum.Enum):
    NO_LOWERING = "no lowering"  # no lowering for this op in this domain, no function body
    CUSTOM_DOMAIN = "custom domain"  # a domain the frontend has no lowerings for
    ATTRIBUTES = "attributes"  # attributes the lowering does not read
    VALUES = "values"  # the lowering refuses these attribute or input values
    OUTPUTS = "outputs"  # optional outputs the lowering does not compute
    ELEMENT_TYPE = "element type"
    OPSET = "opset"  # the model's opset is outside the supported range
    DATA_DEPENDENT = "data dependent"  # an input that must be constant is computed
    FUNCTION_BODY = "function body"  # a node of its ONNX function body is refused
    INVALID = "invalid"  # a FrontendError: the node cannot be lowered as written
    BLOCKED = "blocked"  # needs a value that a refused node computes
    NOT_LOWERED = "not lowered"  # in an If branch not taken, or a body never lowered


class Refusal(UnsupportedOp):
    """An `UnsupportedOp` that says which kind of refusal it is."""

    def __init__(self, reason: Reason, message: str, **where: object) -> None:
        super().__init__(message, **where)  # type: ignore[arg-type]
        self.reason = reason


@dataclass(frozen=True, order=True)
class OpKind:
    domain: str  # "" for the default ONNX domain
    op_type: str
    opset: int | None  # the version the model imports for the domain

    def label(self) -> str:
        return f"{self.domain}.{self.op_type}" if self.domain else self.op_type


@dataclass(frozen=True)
class NodeOutcome:
    kind: OpKind
    node: str
    status: OpStatus
    reason: Reason | None = None
    detail: str = ""


@dataclass(frozen=True)
class Finding:
    """One reason some nodes of a kind (or the model itself) are refused."""

    reason: Reason
    detail: str
    nodes: tuple[str, ...]  # the first FIRST_NODES
    node_count: int

    def text(self) -> str:
        if not self.nodes:
            return self.detail
        names = ", ".join(self.nodes)
        more = (
            f" and {self.node_count - len(self.nodes)} more"
            if self.node_count > len(self.nodes)
            else ""
        )
        return f"node{'s' if self.node_count > 1 else ''} {names}{more}: {self.detail}"

    def to_json(self) -> dict[str, object]:
        return {
            "reason": self.reason.value,
            "detail": self.detail,
            "nodes": list(self.nodes),
            "node_count": self.node_count,
        }


@dataclass(frozen=True)
class OpCoverage:
    kind: OpKind
    count: int  # nodes of this kind in the model (subgraphs and local functions included)
    status: OpStatus
    nodes: tuple[str, ...]  # the first few nodes of this kind
    findings: tuple[Finding, ...] = ()  # why, when not supported

    def reason(self) -> str:
        return "; ".join(f.text() for f in self.findings)

    def to_json(self) -> dict[str, object]:
        return {
            "domain": self.kind.domain,
            "op_type": self.kind.op_type,
            "opset": self.kind.opset,
            "count": self.count,
            "status": self.status.value,
            "nodes": list(self.nodes),
            "reason": self.reason(),
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass(frozen=True)
class Coverage:
    ops: tuple[OpCoverage, ...]  # sorted by status (unsupported first), then op
    problems: tuple[Finding, ...] = ()  # refusals that are no op's: input and weight types

    @property
    def refused(self) -> tuple[OpCoverage, ...]:
        return tuple(o for o in self.ops if o.status in (OpStatus.UNSUPPORTED, OpStatus.INVALID))

    @property
    def complete(self) -> bool:
        return not self.problems and all(o.status is OpStatus.SUPPORTED for o in self.ops)

    def summary(self) -> str:
        n = len(self.ops)
        if self.complete:
            return f"all {n} op type{'s' if n != 1 else ''} supported"
        parts = []
        refused = self.refused
        if refused:
            names = ", ".join(o.kind.label() for o in refused)
            parts.append(f"{len(refused)} of {n} op types unsupported: {names}")
        blocked = [o for o in self.ops if o.status is OpStatus.NOT_REACHED]
        if blocked:
            parts.append(f"{len(blocked)} not reached (downstream of a refused node)")
        parts.extend(p.detail for p in self.problems)
        return "; ".join(parts)

    def message(self) -> str:
        """`unsupported ops (2 kinds, 3 nodes): Foo (nodes a, b: not supported), ...`."""
        refused = self.refused
        nodes = sum(f.node_count for o in refused for f in o.findings)
        parts = [f"{o.kind.label()} ({o.reason()})" for o in refused]
        head = f"unsupported ops ({_count(len(refused), 'kind')}, {_count(nodes, 'node')})"
        text = [f"{head}: {', '.join(parts)}"] if parts else []
        return "; ".join([*text, *(p.detail for p in self.problems)]) or "all ops supported"

    def to_json(self) -> dict[str, object]:
        return {
            "summary": self.summary(),
            "complete": self.complete,
            "ops": [o.to_json() for o in self.ops],
            "problems": [p.to_json() for p in self.problems],
        }


_ORDER = {
    OpStatus.UNSUPPORTED: 0,
    OpStatus.INVALID: 1,
    OpStatus.NOT_REACHED: 2,
    OpStatus.SUPPORTED: 3,
}


def reason_of(err: FrontendError) -> Reason:
    if isinstance(err, Refusal):
        return err.reason
    if isinstance(err, UnsupportedOp):
        return Reason.VALUES
    return Reason.INVALID


@dataclass
class Recorder:
    """Outcomes of one lowering.  `keep_going` also records what `compile` stops at
    (data-dependent inputs, malformed nodes): inspect wants all of it."""

    keep_going: bool = False
    outcomes: list[NodeOutcome] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)  # refusals that are no node's
    #: value name -> what refused it ("node 'r'", "initializer 'w'")
    blocked: dict[str, str] = field(default_factory=dict)
    errors: list[FrontendError] = field(default_factory=list)

    def takes(self, err: FrontendError) -> bool:
        """Whether to record `err` and go on (else the caller raises it).  compile stops
        at a data-dependent input (the ONNX backend specializes on it and lowers again) and
        at a malformed node."""
        if self.keep_going:
            return True
        return isinstance(err, UnsupportedOp) and reason_of(err) is not Reason.DATA_DEPENDENT

    def supported(self, kind: OpKind, node: str) -> None:
        self.outcomes.append(NodeOutcome(kind, node, OpStatus.SUPPORTED))

    def refused(self, kind: OpKind, node: str, outputs: Iterable[str], err: FrontendError) -> None:
        reason = reason_of(err)
        status = OpStatus.INVALID if reason is Reason.INVALID else OpStatus.UNSUPPORTED
        self.outcomes.append(NodeOutcome(kind, node, status, reason, err.message))
        self.errors.append(err)
        self.block(outputs, f"node '{node}'")

    def not_reached(
        self, kind: OpKind, node: str, outputs: Iterable[str], by: str, detail: str = ""
    ) -> None:
        detail = detail or f"needs a value from refused {by}"
        self.outcomes.append(NodeOutcome(kind, node, OpStatus.NOT_REACHED, Reason.BLOCKED, detail))
        self.block(outputs, by)

    def problem(self, err: UnsupportedOp, values: Iterable[str], what: str) -> None:
        """A refusal that is no node's (a graph input or initializer); blocks `values`."""
        self.problems.append(Finding(reason_of(err), err.message, (), 0))
        self.errors.append(err)
        self.block(values, what)

    def block(self, values: Iterable[str], by: str) -> None:
        for v in values:
            if v:
                self.blocked[v] = by

    def blocker(self, inputs: Iterable[str]) -> str | None:
        return next((self.blocked[i] for i in inputs if i in self.blocked), None)

    def raise_if_refused(self) -> None:
        """Raise what was recorded: a single refusal as itself, several as one
        UnsupportedOp naming every op kind and node."""
        if not self.errors:
            return
        if len(self.errors) == 1:
            raise self.errors[0]
        raise UnsupportedOp(build_coverage({}, self).message())


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def _findings(outcomes: Iterable[NodeOutcome]) -> tuple[Finding, ...]:
    grouped: dict[tuple[Reason, str], list[str]] = {}
    for o in outcomes:
        assert o.reason is not None
        names = grouped.setdefault((o.reason, o.detail), [])
        if o.node not in names:
            names.append(o.node)
    return tuple(
        Finding(reason, detail, tuple(names[:FIRST_NODES]), len(names))
        for (reason, detail), names in grouped.items()
    )


def build_coverage(census: Mapping[OpKind, Sequence[str]], recorder: Recorder) -> Coverage:
    """One record per op kind: counts from the model's census, status from the lowering."""
    visits: dict[OpKind, list[NodeOutcome]] = {}
    for o in recorder.outcomes:
        visits.setdefault(o.kind, []).append(o)
    ops = []
    for kind in sorted(census.keys() | visits.keys()):
        names = list(census.get(kind, ()))
        seen = visits.get(kind, [])
        if not names:
            names = list(dict.fromkeys(o.node for o in seen))
        statuses = {o.status for o in seen}
        status = min(statuses, key=_ORDER.__getitem__) if statuses else OpStatus.NOT_REACHED
        if status is OpStatus.SUPPORTED:
            findings: tuple[Finding, ...] = ()
        elif seen:
            findings = _findings(o for o in seen if o.status is status)
        else:
            detail = "never lowered (an If branch not taken, or a body not reached)"
            findings = (Finding(Reason.NOT_LOWERED, detail, (), len(names)),)
        ops.append(OpCoverage(kind, len(names), status, tuple(names[:FIRST_NODES]), findings))
    ops.sort(key=lambda o: (_ORDER[o.status], o.kind))
    return Coverage(tuple(ops), tuple(recorder.problems))


def opset_refused(census: Mapping[OpKind, Sequence[str]], err: UnsupportedOp) -> Coverage:
    """Coverage of a model whose default opset is out of range: nothing was lowered."""
    recorder = Recorder(keep_going=True)
    for kind, names in census.items():
        for name in names:
            if kind.domain == "":
                recorder.outcomes.append(
                    NodeOutcome(kind, name, OpStatus.UNSUPPORTED, Reason.OPSET, err.message)
                )
    return build_coverage(census, recorder)
