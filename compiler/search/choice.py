"""Choosing one e-node per e-class: the extracted program.

The choice minimises an estimate of runtime work (`local_cost`): elements computed per
op, weighted by op (a transcendental costs more than an add), a reduction by the elements it
reads plus a kernel's overhead; views are nearly free, and so is anything built from
constants only, because the decoder folds such a subterm into a weight at compile time
(`fold.py`).  So a scale moved onto a weight, or BatchNorm folded into a convolution, is
cheaper than the original by the multiplies it removes.

Shared work is counted once (a DAG cost), and what the scheduler will materialize (a value
read by two kernels, or through a broadcast) is priced in, mirroring `schedule.partition`:
that is what makes a joined Q/K/V contraction, or a softmax normalised after P@V, win.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from luminal.compiler.ir.graph import numel
from luminal.compiler.search.language import Kind, Term
from luminal.compiler.search.snapshot import EGraphView

#: Work per element, relative to an add.
OP_WEIGHT = {
    Term.EXP2: 4,
    Term.LOG2: 4,
    Term.SIN: 4,
    Term.SQRT: 4,
    Term.RECIP: 2,
    Term.MOD: 2,
    Term.IDIV: 2,
}
#: Shape unknown (a node made after the last analysis round): priced as huge.
UNKNOWN = 1 << 40
#: A reduction is a kernel of its own: launch, and a pass over memory its fused
#: neighbours avoid.  In element-operations.
KERNEL = 1 << 17
#: Leaves that cost nothing to read (iota is computed, cheaply).
_FREE = frozenset({Term.INPUT, Term.CONST, Term.FILL})
#: What the scheduler computes in an elementwise kernel.
_COMPUTED = frozenset(
    t for t in Term if t.kind in (Kind.UNARY, Kind.BINARY, Kind.TERNARY, Kind.JOIN)
) | {Term.GATHER}


def local_cost(view: EGraphView, n: int, folded_children: bool) -> int:
    """Estimated work of one e-node, given whether its operands all fold to constants."""
    node = view.nodes[n]
    op = node.op
    if op in _FREE:
        return 0
    if op is Term.IOTA:
        return 1
    if folded_children:
        return 1  # folded into a weight at compile time
    if op.kind is Kind.VIEW:
        return 1
    reduces = op.kind is Kind.REDUCE
    shp = view.shapes.get(node.children[0] if reduces else view.node_class[n])
    size = numel(shp) if shp is not None else UNKNOWN
    return OP_WEIGHT.get(op, 1) * size + (KERNEL if reduces else 1)


@dataclass(frozen=True)
class Choice:
    best: dict[int, int]  # e-class -> chosen e-node
    cost: dict[int, int]  # e-class -> tree cost of the choice
    folds: dict[int, bool]  # e-class -> the choice is built from constants only


#: Rounds of re-extraction with already-chosen e-classes free to reuse.
DAG_ROUNDS = 4


def choose(view: EGraphView, roots: list[int]) -> Choice:
    """The cheapest term for `roots`, counting shared work once.

    A tree cost counts a subterm once per use, so it happily recomputes a shared
    contraction with a scaled weight to save one elementwise multiply.  So extraction is
    repeated with the e-classes the previous choice already computes priced as free to
    reuse, and the choice with the lowest DAG cost (each chosen e-node counted once) wins.
    Then `_adopt_shared` tries, for each e-class several chosen e-classes could read, to
    switch all of them at once (one joined Q/K/V contraction instead of three)."""
    best, best_cost = None, None
    free: frozenset[int] = frozenset()
    for _ in range(DAG_ROUNDS):
        choice = _extract(view, free)
        used = _reachable(view, choice, roots)
        cost = _dag_cost(view, choice, used, roots)
        if best_cost is None or cost < best_cost:
            best, best_cost = choice, cost
        if used == free:
            break
        free = used
    assert best is not None and best_cost is not None
    return _adopt_shared(view, best, best_cost, roots)


def _dag_cost(view: EGraphView, choice: Choice, used: frozenset[int], roots: list[int]) -> int:
    work = sum(_own_cost(view, choice, c) for c in used)
    return work + _materialized_cost(view, choice, used, roots)


def _materialized_cost(
    view: EGraphView, choice: Choice, used: frozenset[int], roots: list[int]
) -> int:
    """What the scheduler adds beyond the ops: a computed value that is an output, is read
    by two kernels, or is read through a broadcasting expand gets a buffer and a kernel of
    its own -- unless it is the only reader of one reduction, whose epilogue it becomes.
    Mirrors `schedule.partition` and `fuse_epilogues` on the chosen DAG."""
    op = {c: view.nodes[choice.best[c]].op for c in used}
    kids = {c: set(view.nodes[choice.best[c]].children) & used for c in used}
    computed = {c for c in used if op[c] in _COMPUTED and not choice.folds.get(c)}
    reductions = {c for c in used if op[c].kind is Kind.REDUCE}
    mat = reductions | {c for c in used if op[c] is Term.SCATTER} | (set(roots) & computed)
    consumers: dict[int, list[int]] = {c: [] for c in used}
    for c in used:
        for k in kids[c]:
            consumers[k].append(c)
    for c in used:
        if op[c] is Term.EXPAND:
            root = c
            while root in op and op[root].kind is Kind.VIEW:
                nxt = next(iter(kids[root]), None)
                if nxt is None:
                    break
                root = nxt
            grows = numel(view.shapes.get(c, ())) > numel(view.shapes.get(root, ()))
            if root in computed and grows:
                mat.add(root)
    order = _topological(used, kids)
    # The scheduler decides producers first (schedule.partition walks the graph in
    # order), which materializes every link of an elementwise chain that feeds two
    # kernels; mirror that, so the estimate matches the kernels it will really make.
    changed = True
    while changed:
        changed = False
        for c in order:
            if c in computed and c not in mat and _reads_twice(c, consumers, mat):
                mat.add(c)
                changed = True
    readers = {c: _readers(c, consumers, mat) for c in mat}
    extra = 0
    for c in mat & computed:
        sources = _sources(c, kids, mat)
        fed = [r for r in sources if r in reductions]
        epilogue = (
            len(fed) == 1
            and readers[fed[0]] == {c}
            and numel(view.shapes.get(c, ())) == numel(view.shapes.get(fed[0], ()))
        )
        if not epilogue:
            extra += KERNEL + numel(view.shapes.get(c, ()))
    return extra


def _frontier(
    start: Iterable[int], step: Mapping[int, Iterable[int]], mat: set[int], limit: int = 0
) -> set[int]:
    """The materialized e-classes reached from `start` along `step` without passing
    through another materialized one (stops early once more than `limit` are found)."""
    found: set[int] = set()
    stack = list(start)
    seen: set[int] = set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        if p in mat:
            found.add(p)
            if limit and len(found) > limit:
                break
        else:
            stack.extend(step[p])
    return found


def _readers(c: int, consumers: dict[int, list[int]], mat: set[int], limit: int = 0) -> set[int]:
    """The materialized e-classes whose kernels read c (stops early past `limit`)."""
    return _frontier(consumers[c], consumers, mat, limit)


def _reads_twice(c: int, consumers: dict[int, list[int]], mat: set[int]) -> bool:
    return len(_readers(c, consumers, mat, limit=1)) > 1


def _sources(c: int, kids: dict[int, set[int]], mat: set[int]) -> set[int]:
    """The materialized e-classes the kernel computing c reads."""
    return _frontier(kids[c], kids, mat)


def _topological(nodes: frozenset[int], kids: dict[int, set[int]]) -> list[int]:
    order: list[int] = []
    done: set[int] = set()
    for start in nodes:
        stack = [(start, False)]
        while stack:
            c, ready = stack.pop()
            if c in done:
                continue
            if ready:
                done.add(c)
                order.append(c)
                continue
            stack.append((c, True))
            stack.extend((k, False) for k in kids[c] if k not in done)
    return order


#: How many levels above a shared reduction the adoption move may switch e-classes.
ADOPT_DEPTH = 4
#: Most seconds spent trying adoptions per e-graph (each try prices the whole DAG).
ADOPT_SECONDS = 2.0


def _adopt_shared(view: EGraphView, choice: Choice, cost: int, roots: list[int]) -> Choice:
    """Try each reduction the choice does not compute as a shared subterm: switch every
    e-class within a few levels above it to the e-node leading to it, all at once, and keep
    the switch when the DAG cost drops.  (Adopting a joined Q/K/V contraction pays off only
    when all three projections read it, so one e-class at a time would never take it.)"""
    used = _reachable(view, choice, roots)
    parents: dict[int, list[int]] = {}
    for n, node in enumerate(view.nodes):
        for k in set(node.children):
            parents.setdefault(k, []).append(n)
    candidates = [
        c
        for c in choice.best
        if c not in used
        and view.nodes[choice.best[c]].op.kind is Kind.REDUCE
        and len({view.node_class[n] for n in parents.get(c, [])}) >= 2
    ]
    deadline = time.perf_counter() + ADOPT_SECONDS
    for shared in candidates:
        if time.perf_counter() > deadline:
            break
        switch: dict[int, int] = {}
        frontier = {shared}
        for _ in range(ADOPT_DEPTH):
            nxt: set[int] = set()
            for k in frontier:
                for n in parents.get(k, []):
                    c = view.node_class[n]
                    if c == shared or c in switch:
                        continue
                    if all(kid in choice.best for kid in view.nodes[n].children):
                        switch[c] = n
                        if c not in used:
                            nxt.add(c)
            frontier = nxt
        if len(set(switch) & used) < 2:
            continue
        trial = Choice({**choice.best, **switch}, choice.cost, choice.folds)
        if _cyclic(view, trial, roots):
            continue
        trial_used = _reachable(view, trial, roots)
        trial_cost = _dag_cost(view, trial, trial_used, roots)
        # Undo the switches that do not help (an e-class that merely could read the
        # shared term too), one at a time.
        for c in sorted(set(switch) & used):
            undo = Choice({**trial.best, c: choice.best[c]}, choice.cost, choice.folds)
            if _cyclic(view, undo, roots):
                continue
            undo_used = _reachable(view, undo, roots)
            undo_cost = _dag_cost(view, undo, undo_used, roots)
            if undo_cost <= trial_cost:
                trial, trial_used, trial_cost = undo, undo_used, undo_cost
        if trial_cost < cost:
            choice, cost, used = trial, trial_cost, trial_used
    return choice


def _cyclic(view: EGraphView, choice: Choice, roots: list[int]) -> bool:
    state: dict[int, int] = {}  # 1: on the path, 2: done
    for root in roots:
        stack = [(root, False)]
        while stack:
            cls, leaving = stack.pop()
            if leaving:
                state[cls] = 2
                continue
            if state.get(cls) == 2:
                continue
            if state.get(cls) == 1:
                return True
            state[cls] = 1
            stack.append((cls, True))
            for k in view.nodes[choice.best[cls]].children:
                if state.get(k) == 1:
                    return True
                if state.get(k) != 2:
                    stack.append((k, False))
    return False


def _own_cost(view: EGraphView, choice: Choice, cls: int) -> int:
    n = choice.best[cls]
    kids = view.nodes[n].children
    return local_cost(view, n, bool(kids) and choice.folds[cls])


def _reachable(view: EGraphView, choice: Choice, roots: list[int]) -> frozenset[int]:
    seen: set[int] = set()
    stack = [r for r in roots if r in choice.best]
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        stack.extend(k for k in view.nodes[choice.best[c]].children if k in choice.best)
    return frozenset(seen)


def _extract(view: EGraphView, free: frozenset[int]) -> Choice:
    """Cheapest e-node per e-class bottom-up in cost order (Knuth's generalisation of
    Dijkstra); an e-class in `free` adds nothing to the cost of the terms that use it."""
    parents: list[list[int]] = [[] for _ in view.classes]
    pending = [0] * len(view.nodes)
    heap: list[tuple[int, int]] = []
    best: dict[int, int] = {}
    cost: dict[int, int] = {}
    folds: dict[int, bool] = {}

    def price(n: int) -> tuple[int, bool]:
        node = view.nodes[n]
        kids = set(node.children)
        foldable = node.op in (Term.CONST, Term.FILL) or (
            bool(kids) and node.op.kind is not Kind.SOURCE and all(folds[c] for c in kids)
        )
        used = sum(0 if c in free else cost[c] for c in kids)
        return local_cost(view, n, foldable and bool(kids)) + used, foldable

    for n, node in enumerate(view.nodes):
        kids = set(node.children)
        pending[n] = len(kids)
        for c in kids:
            parents[c].append(n)
        if not kids:
            heapq.heappush(heap, (price(n)[0], n))
    while heap:
        c_n, n = heapq.heappop(heap)
        cls = view.node_class[n]
        if cls in best:
            continue
        best[cls] = n
        cost[cls], folds[cls] = c_n, price(n)[1]
        for p in parents[cls]:
            pending[p] -= 1
            if pending[p] == 0:
                heapq.heappush(heap, (price(p)[0], p))
    return Choice(best, cost, folds)
