"""One schedule kernel -> `@triton.jit` source and the launches that run it.

    elementwise  a 1-D block of flat output elements per program; views, elementwise ops
                 and gathers inlined at the unflattened index (`body.Body`)
    reduce       BLOCK_O output rows per program; a loop over the reduced extent in
                 BLOCK_R steps into a [BLOCK_O, BLOCK_R] accumulator, then tl.sum / max;
                 a fused epilogue (softmax's scale, a norm's affine) runs on the result
    contraction  BLOCK_M x BLOCK_N output tiles, a loop over K in BLOCK_K steps of tl.dot;
                 the epilogue (bias, activation, residual) is applied to the tile in
                 registers.  Variant(impl="blas"): torch.matmul on strided views
                 (cuBLAS / hipBLAS), then the same tile kernel reads its result as `acc`
    scatter      a copy of the data, then one launch over the updates

A contraction's loops are grouped by which operand moves along them: M (only X), N
(only Y), K (reduced) and B (both: the batch, one grid axis).  Each group is flattened
into one block index, and its loop variables are recovered with floor division and
modulo, so a convolution (K = Cin x kh x kw, M = output pixels) and a batched,
permuted attention product are the same tiled kernel.
"""

from __future__ import annotations

from luminal.compiler.backends.triton import launch as lp
from luminal.compiler.backends.triton import texpr
from luminal.compiler.backends.triton.body import Body
from luminal.compiler.backends.triton.launch import Arg, Buf, KernelCode, Launch
from luminal.compiler.backends.triton.tiles import write_contraction
from luminal.compiler.ir import DType, Op, numel
from luminal.compiler.schedule import Kernel, Schedule
from luminal.compiler.schedule.indexing import row_major, unflatten
from luminal.compiler.schedule.symbolic import Dyn, Lin, Var
from luminal.compiler.schedule.variant import Variant

#: Offsets at or above this use 64-bit index arithmetic.
WIDE = 1 << 30


class KernelWriter:
    def __init__(
        self, sched: Schedule, kernel: Kernel, opts: lp.TritonOptions, variant: Variant
    ) -> None:
        self.s = sched
        self.g = sched.graph
        self.k = kernel
        self.o = opts
        self.v = variant
        sizes = [numel(self.g.nodes[kernel.node].shape)]
        sizes += [self.numel(r) for r in kernel.reads]
        self.idx_type = "tl.int64" if max(sizes) >= WIDE else "tl.int32"
        self._begin()

    # ---- what Body needs ---------------------------------------------------------------
    def _begin(self) -> None:
        self.counter = 0
        self.params: dict[str, Arg] = {}
        self.uses_err = False

    def pointer(self, i: int) -> str:
        name = f"p{i}" if i >= 0 else f"q{-i}"
        if name not in self.params:
            self.params[name] = Buf(self.s.homes[i], self.s.dtype(i), self.numel(i))
        return name

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def numel(self, i: int) -> int:
        return int(self.s.packed[i].size) if i < 0 else numel(self.g.nodes[i].shape)

    # ---- shared pieces -------------------------------------------------------------------
    def pid(self, axis: int) -> str:
        pid = f"tl.program_id({axis})"
        return f"{pid}.to(tl.int64)" if self.idx_type == "tl.int64" else pid

    def flat(self, name: str, extent: int, block: str, start: str) -> list[str]:
        """A block of flat indices from `start`; `name_live` marks the real ones.  When
        the block size does not divide the extent (a compile-time test: both are
        constants), the lanes past the end are clamped onto the last element, so every
        load stays in bounds and only stores need the mask.  Blocks that divide it skip
        the clamp, which would hide the indices' contiguity from Triton's vectorizer."""
        return [
            f"{name} = {start} + tl.arange(0, {block})",
            f"{name}_live = {name} < {extent}",
            f"if {extent} % {block} != 0:",
            f"    {name} = tl.minimum({name}, {max(extent - 1, 0)})",
        ]

    def function(self, fn: str, blocks: list[str], lines: list[str], dest: Buf) -> str:
        node = self.g.nodes[self.k.node]
        params = ["out", *self.params, *(["err"] if self.uses_err else [])]
        params += [f"{b}: tl.constexpr" for b in blocks]
        shape = "x".join(map(str, node.shape)) or "scalar"
        head = (
            "@triton.jit\n"
            f"def {fn}({', '.join(params)}):\n"
            f"    # {self.k.kind}: node %{self.k.node} {node.op.value} -> {shape} {node.dtype.value}"
            f" -> {dest.place.kind}@{dest.place.index}\n"
        )
        return head + "".join(f"    {ln}\n" for ln in lines)

    def args(self, dest: Buf) -> tuple[Arg, ...]:
        return (dest, *self.params.values(), *(("err",) if self.uses_err else ()))

    def dest(self) -> Buf:
        node = self.g.nodes[self.k.node]
        return Buf(self.k.dest, node.dtype, numel(node.shape))

    def write(self) -> KernelCode:
        node = self.g.nodes[self.k.node]
        if numel(node.shape) == 0:
            return KernelCode(f"# {self.k.name}: empty output, nothing to launch\n", ())
        if self.k.kind == "contraction":
            return self._contraction()
        if self.k.kind == "reduce":
            return self._reduce()
        if self.k.kind == "scatter":
            return self._scatter()
        return self._elementwise()

    # ---- kernels -------------------------------------------------------------------------
    def _elementwise(self) -> KernelCode:
        node = self.g.nodes[self.k.node]
        n = numel(node.shape)
        lines = self.flat("o", n, "BLOCK", f"{self.pid(0)} * BLOCK")
        body = Body(self, {"o": "o"})
        top = self.k.dest == self.s.homes.get(self.k.node)
        v = body.value(self.k.node, unflatten(Lin.of(Var("o", n)), node.shape), top=top)
        lines += [*body.lines, f"tl.store(out + o, {v}, mask=o_live)"]
        dest = self.dest()
        src = self.function(self.k.name, ["BLOCK"], lines, dest)
        grid = (f"triton.cdiv({n}, L['BLOCK'])",)
        run = Launch(self.k.name, grid, self.args(dest), lp.elementwise(n, self.o), {"BLOCK": n})
        return KernelCode(src, (run,))

    def _reduce(self) -> KernelCode:
        red = self.g.nodes[self.k.reduction if self.k.reduction is not None else self.k.node]
        src = self.g.nodes[red.src[0]]
        rows = numel(red.shape)
        raxes = [a for a in red.arg if src.shape[a] != 1]
        rshape = tuple(src.shape[a] for a in raxes)
        reduced = numel(rshape)
        acc_t = texpr.acc_type(red.op, red.dtype)
        init = texpr.reduce_init(red.op, red.dtype)
        lines = self.flat("o", rows, "BLOCK_O", f"{self.pid(0)} * BLOCK_O")
        lines += [
            "oi = o[:, None]",
            f"acc = tl.zeros([BLOCK_O, BLOCK_R], {texpr.tltype(acc_t)}) + {init}",
        ]
        if reduced:
            oidx = unflatten(Lin.of(Var("o", rows)), red.shape)
            ridx = unflatten(Lin.of(Var("r", reduced)), rshape)
            full = tuple(
                ridx[raxes.index(a)] if a in raxes else oidx[a] for a in range(len(src.shape))
            )
            body = Body(self, {"o": "oi", "r": "ri"})
            v = body.value(red.src[0], full)
            if acc_t is not red.dtype:
                v = f"{v}.to({texpr.tltype(acc_t)})"
            if red.op is Op.SUM and red.dtype is not DType.BOOL:
                combine = "acc + x"
            elif acc_t.is_float:
                combine = "tl.maximum(acc, x, propagate_nan=tl.PropagateNan.ALL)"
            else:
                combine = "tl.maximum(acc, x)"
            lines.append(f"for r0 in range(0, {reduced}, BLOCK_R):")
            inner = self.flat("r", reduced, "BLOCK_R", "r0")
            inner += ["ri = r[None, :]", *body.lines]
            inner += [f"x = tl.where(r_live[None, :], {v}, {init})", f"acc = {combine}"]
            lines += [f"    {ln}" for ln in inner]
        if red.op is Op.SUM and red.dtype is not DType.BOOL:
            lines.append("res = tl.sum(acc, 1)")
        elif acc_t.is_float:  # tl.max may drop NaN; np.max propagates it
            nan = texpr.literal(float("nan"), acc_t)
            lines.append("res = tl.max(acc, 1)")
            lines.append(f"res = tl.where(tl.max((acc != acc).to(tl.int32), 1) > 0, {nan}, res)")
        else:
            lines.append("res = tl.max(acc, 1)")
        if red.dtype is DType.BOOL:
            lines.append("res = res != 0")
        elif acc_t is not red.dtype:
            lines.append(f"res = res.to({texpr.tltype(red.dtype)})")
        v = self.epilogue(lines, Lin.of(Var("o", rows)), "res", {"o": "o"})
        lines.append(f"tl.store(out + o, {v}, mask=o_live)")
        dest = self.dest()
        fn = self.function(self.k.name, ["BLOCK_O", "BLOCK_R"], lines, dest)
        grid = (f"triton.cdiv({rows}, L['BLOCK_O'])",)
        params = lp.reduce(rows, reduced, self.o)
        extents = {"BLOCK_O": rows, "BLOCK_R": reduced}
        return KernelCode(fn, (Launch(self.k.name, grid, self.args(dest), params, extents),))

    def epilogue(self, lines: list[str], flat: Lin, value: str, names: dict[str, str]) -> str:
        """The value stored at flat output element `flat` of a reduction whose result
        there is `value`: the value itself, or the fused epilogue computed from it."""
        if self.k.reduction is None:
            return value
        enode = self.g.nodes[self.k.node]
        body = Body(self, names, {self.k.reduction: value})
        v = body.value(self.k.node, unflatten(flat, enode.shape), top=True)
        lines += body.lines
        return v

    def _scatter(self) -> KernelCode:
        node = self.g.nodes[self.k.node]
        data, indices, updates = node.src
        n = numel(node.shape)
        dest = self.dest()
        # 1: out = data
        lines = self.flat("o", n, "BLOCK", f"{self.pid(0)} * BLOCK")
        body = Body(self, {"o": "o"})
        v = body.value(data, unflatten(Lin.of(Var("o", n)), node.shape))
        lines += [*body.lines, f"tl.store(out + o, {v}, mask=o_live)"]
        init = f"{self.k.name}_init"
        src = self.function(init, ["BLOCK"], lines, dest)
        first = Launch(
            init,
            (f"triton.cdiv({n}, L['BLOCK'])",),
            self.args(dest),
            lp.elementwise(n, self.o),
            {"BLOCK": n},
        )
        # 2: out[..., indices[u], ...] = updates[u]
        self._begin()
        ushape = self.g.nodes[updates].shape
        u = numel(ushape)
        if u == 0:
            return KernelCode(src, (first,))
        uidx = unflatten(Lin.of(Var("u", u)), ushape)
        lines = self.flat("u", u, "BLOCK", f"{self.pid(0)} * BLOCK")
        body = Body(self, {"u": "u"})
        iv = body.value(indices, uidx)
        uv = body.value(updates, uidx)
        size = node.shape[node.arg]
        gname = body.checked_index(iv, size)
        target = list(uidx)
        target[node.arg] = Lin.of(Dyn(gname, size))
        off = texpr.index(row_major(tuple(target), node.shape), {"u": "u"})
        lines += [*body.lines, f"tl.store(out + ({off}) + 0 * u, {uv}, mask=u_live)"]
        src += "\n\n" + self.function(self.k.name, ["BLOCK"], lines, dest)
        second = Launch(
            self.k.name,
            (f"triton.cdiv({u}, L['BLOCK'])",),
            self.args(dest),
            lp.elementwise(u, self.o),
            {"BLOCK": u},
        )
        return KernelCode(src, (first, second))

    def _contraction(self) -> KernelCode:
        return write_contraction(self)
