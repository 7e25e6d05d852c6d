"""ATen elementwise ops: arithmetic, comparisons, logic, activations, casts, where.

Operands are cast to the type torch computes in (the result type for arithmetic, the
promoted operand type for comparisons); float16 / bfloat16 math runs in float32 like
torch's opmath and is rounded once, when the walker casts the result to its declared type.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from luminal.compiler.frontend.aten_ops.context import IR_TO_TORCH, AtenContext, Lowering
from luminal.compiler.frontend.compose import math as m
from luminal.compiler.ir import DType, GraphBuilder, Op, Value

Fn1 = Callable[[GraphBuilder, Value], Value]
Fn2 = Callable[[GraphBuilder, Value, Value], Value]


def promoted(ctx: AtenContext, *names: str) -> DType:
    """torch's type promotion over the named arguments (tensors and Python numbers)."""
    probes: list[object] = []
    for name in names:
        value = ctx.args.get(name)
        if isinstance(value, Value):
            probes.append(torch.empty((1,) * value.ndim, dtype=IR_TO_TORCH[value.dtype]))
        elif value is not None:
            probes.append(value)
    result = probes[0] if isinstance(probes[0], torch.Tensor) else torch.tensor(probes[0])
    for probe in probes[1:]:
        result = torch.empty((1,), dtype=torch.result_type(result, probe))
    return ctx.dtype(result.dtype)


def _arith_dtype(ctx: AtenContext) -> DType:
    dt = ctx.out_dtype
    return DType.F32 if dt in (DType.F16, DType.BF16) else dt


def _scaled(ctx: AtenContext, name: str, dtype: DType) -> Value:
    """`name` times the op's `alpha` (add/sub/rsub)."""
    value = ctx.operand(name, dtype)
    alpha = ctx.arg("alpha", 1)
    return value if alpha == 1 else m.mul(ctx.b, value, ctx.b.const(alpha, dtype))


def _add(ctx: AtenContext) -> Value:
    dt = _arith_dtype(ctx)
    return m.add(ctx.b, ctx.operand("self", dt), _scaled(ctx, "other", dt))


def _sub(ctx: AtenContext) -> Value:
    dt = _arith_dtype(ctx)
    return m.sub(ctx.b, ctx.operand("self", dt), _scaled(ctx, "other", dt))


def _rsub(ctx: AtenContext) -> Value:
    dt = _arith_dtype(ctx)
    return m.sub(ctx.b, ctx.operand("other", dt), _scaled(ctx, "self", dt))


def _mul(ctx: AtenContext) -> Value:
    dt = _arith_dtype(ctx)
    return m.mul(ctx.b, ctx.operand("self", dt), ctx.operand("other", dt))


def _div(ctx: AtenContext) -> Value:
    b, mode = ctx.b, ctx.arg("rounding_mode")
    if mode is None:
        dt = ctx.compute_dtype()
        return m.div(b, ctx.operand("self", dt), ctx.operand("other", dt))
    dt = _arith_dtype(ctx)
    x, y = ctx.operand("self", dt), ctx.operand("other", dt)
    if dt.is_int:
        if mode == "trunc":
            return m.div(b, x, y)
        # floor division: (x - python_mod(x, y)) / y is exact
        return m.div(b, m.sub(b, x, m.mod(b, x, y, fmod=False)), y)
    q = m.div(b, x, y)
    return trunc(b, q) if mode == "trunc" else floor(b, q)


def trunc(b: GraphBuilder, x: Value) -> Value:
    """Round toward zero: x - fmod(x, 1); infinities pass through."""
    if not x.dtype.is_float:
        return x
    frac = b.binary(Op.MOD, x, m.like(b, 1, x))
    inf = b.binary(Op.CMPEQ, m.abs_(b, x), m.like(b, math.inf, x))
    return b.where(inf, x, m.sub(b, x, frac))


def floor(b: GraphBuilder, x: Value) -> Value:
    if not x.dtype.is_float:
        return x
    t = trunc(b, x)
    below = b.binary(Op.CMPLT, x, t)  # negative with a fraction
    return b.where(below, m.sub(b, t, m.like(b, 1, t)), t)


def ceil(b: GraphBuilder, x: Value) -> Value:
    return m.neg(b, floor(b, m.neg(b, x))) if x.dtype.is_float else x


def _pow(ctx: AtenContext) -> Value:
    b, dt = ctx.b, ctx.compute_dtype() if ctx.out_dtype.is_float else ctx.out_dtype
    base, exponent = ctx.args.get("self"), ctx.args.get("exponent")
    known = float(exponent) if isinstance(exponent, int | float) else None
    if isinstance(exponent, Value):
        const = b.const_value(exponent)
        if const is not None and const.size == 1:
            known = float(const.reshape(-1)[0])
    x = ctx.as_value(base, dt, "self")
    y = ctx.as_value(exponent, dt, "exponent")
    if not dt.is_float and (known is None or not known.is_integer() or not 0 <= known <= 8):
        raise ctx.unsupported("integer pow needs a constant exponent between 0 and 8")
    out = m.pow_(b, x, y, known)
    return m.broadcast_to(b, out, m.broadcast_shapes(x.shape, y.shape))


def _unary(fn: Fn1, integer_ok: bool = False) -> Lowering:
    """A math function of one tensor, computed in the op's compute type."""

    def lower(ctx: AtenContext) -> Value:
        if integer_ok and not ctx.out_dtype.is_float:
            return fn(ctx.b, ctx.operand("self", ctx.out_dtype))
        return fn(ctx.b, ctx.operand("self", ctx.compute_dtype()))

    return lower


def _compare(fn: Fn2) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        dt = promoted(ctx, "self", "other")
        return fn(ctx.b, ctx.operand("self", dt), ctx.operand("other", dt))

    return lower


def _logical(fn: Fn2) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        return fn(ctx.b, ctx.operand("self", DType.BOOL), ctx.operand("other", DType.BOOL))

    return lower


def _bitwise(fn: Fn2) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        if ctx.out_dtype is not DType.BOOL:
            raise ctx.unsupported("bitwise ops on integers are not supported (bool only)")
        return _logical(fn)(ctx)  # type: ignore[return-value]

    return lower


def _bitwise_not(ctx: AtenContext) -> Value:
    b, x = ctx.b, ctx.tensor("self")
    if x.dtype is DType.BOOL:
        return m.logical_not(b, x)
    if not x.dtype.is_int:
        raise ctx.error("bitwise_not needs an integer or bool tensor")
    return m.sub(b, m.neg(b, x), m.like(b, 1, x))  # two's complement: ~x == -x - 1


def _le(b: GraphBuilder, x: Value, y: Value) -> Value:
    return m.logical_or(b, m.less(b, x, y), m.equal(b, x, y))


def _ge(b: GraphBuilder, x: Value, y: Value) -> Value:
    return _le(b, y, x)


def _ne(b: GraphBuilder, x: Value, y: Value) -> Value:
    return m.logical_not(b, m.equal(b, x, y))


def _binary_out(fn: Fn2, a: str = "self", c: str = "other") -> Lowering:
    """A binary op computed in the result type (maximum, fmod, ...)."""

    def lower(ctx: AtenContext) -> Value:
        dt = _arith_dtype(ctx)
        return fn(ctx.b, ctx.operand(a, dt), ctx.operand(c, dt))

    return lower


def _where(ctx: AtenContext) -> Value:
    dt = ctx.out_dtype
    cond = ctx.operand("condition", DType.BOOL)
    return m.where(ctx.b, cond, ctx.operand("self", dt), ctx.operand("other", dt))


def _masked_fill(ctx: AtenContext) -> Value:
    dt = ctx.out_dtype
    mask = ctx.operand("mask", DType.BOOL)
    x = ctx.operand("self", dt)
    return m.broadcast_to(ctx.b, m.where(ctx.b, mask, ctx.operand("value", dt), x), x.shape)


def _clamp(ctx: AtenContext) -> Value:
    dt = _arith_dtype(ctx)
    b, x = ctx.b, ctx.operand("self", dt)
    lo = None if ctx.args.get("min") is None else ctx.operand("min", dt)
    hi = None if ctx.args.get("max") is None else ctx.operand("max", dt)
    out = m.clip(b, x, lo, hi)
    return m.broadcast_to(b, out, m.broadcast_shapes(out.shape, x.shape))


def _clamp_one(bound: str) -> Lowering:
    def lower(ctx: AtenContext) -> Value:
        dt = _arith_dtype(ctx)
        x, limit = ctx.operand("self", dt), ctx.operand(bound, dt)
        fn = m.maximum if bound == "min" else m.minimum
        return fn(ctx.b, x, limit)

    return lower


def _hardtanh(ctx: AtenContext) -> Value:
    dt = _arith_dtype(ctx)
    b, x = ctx.b, ctx.operand("self", dt)
    lo, hi = ctx.arg("min_val", -1.0), ctx.arg("max_val", 1.0)
    return m.clip(b, x, b.const(lo, dt), b.const(hi, dt))


def _gelu(ctx: AtenContext) -> Value:
    approximate = ctx.arg("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.unsupported(f"approximate='{approximate}'")
    return m.gelu(ctx.b, ctx.operand("self", ctx.compute_dtype()), approximate)


def _leaky_relu(ctx: AtenContext) -> Value:
    x = ctx.operand("self", ctx.compute_dtype())
    return m.leaky_relu(ctx.b, x, float(ctx.arg("negative_slope", 0.01)))


def _elu(ctx: AtenContext) -> Value:
    b, x = ctx.b, ctx.operand("self", ctx.compute_dtype())
    alpha, scale = float(ctx.arg("alpha", 1.0)), float(ctx.arg("scale", 1.0))
    input_scale = float(ctx.arg("input_scale", 1.0))
    e = m.exp(b, m.mul(b, x, m.like(b, input_scale, x)))
    neg_part = m.mul(b, m.sub(b, e, m.like(b, 1, x)), m.like(b, alpha, x))
    out = m.where(b, m.less(b, x, m.like(b, 0, x)), neg_part, x)
    return out if scale == 1.0 else m.mul(b, out, m.like(b, scale, out))


def _softplus(ctx: AtenContext) -> Value:
    b, x = ctx.b, ctx.operand("self", ctx.compute_dtype())
    beta, threshold = float(ctx.arg("beta", 1.0)), float(ctx.arg("threshold", 20.0))
    bx = m.mul(b, x, m.like(b, beta, x))
    # log(1 + exp(bx)) = max(bx, 0) + log(1 + exp(-|bx|)): no overflow.
    tail = m.log(b, m.add(b, m.like(b, 1, x), m.exp(b, m.neg(b, m.abs_(b, bx)))))
    soft = m.mul(b, m.add(b, m.relu(b, bx), tail), m.like(b, 1 / beta, x))
    return m.where(b, m.less(b, m.like(b, threshold, x), bx), x, soft)


def _silu(b: GraphBuilder, x: Value) -> Value:
    return m.mul(b, x, m.sigmoid(b, x))


def _hardsigmoid(b: GraphBuilder, x: Value) -> Value:
    y = m.add(b, m.mul(b, x, m.like(b, 1 / 6, x)), m.like(b, 0.5, x))
    return m.clip(b, y, m.like(b, 0, x), m.like(b, 1, x))


def _sign(b: GraphBuilder, x: Value) -> Value:
    if x.dtype is DType.BOOL:
        return x
    pos = b.cast(m.less(b, m.like(b, 0, x), x), x.dtype)
    neg = b.cast(m.less(b, x, m.like(b, 0, x)), x.dtype)
    return m.sub(b, pos, neg)


def _log_base(scale: float) -> Fn1:
    return lambda b, x: m.mul(b, b.unary(Op.LOG2, x), m.like(b, scale, x))


def _copy_to_out(ctx: AtenContext) -> Value:
    """clone, alias, _to_copy and friends: the value, cast to the declared type."""
    return ctx.b.cast(ctx.tensor("self"), ctx.out_dtype)


def _copy(ctx: AtenContext) -> Value:
    dst, src = ctx.tensor("self"), ctx.tensor("src")
    return m.broadcast_to(ctx.b, ctx.b.cast(src, dst.dtype), dst.shape)


def _rsqrt(b: GraphBuilder, x: Value) -> Value:
    return m.recip(b, m.sqrt(b, x))


def _tan(b: GraphBuilder, x: Value) -> Value:
    return m.div(b, m.sin(b, x), m.cos(b, x))


def _log1p(b: GraphBuilder, x: Value) -> Value:
    return m.log(b, m.add(b, m.like(b, 1, x), x))


def _expm1(b: GraphBuilder, x: Value) -> Value:
    return m.sub(b, m.exp(b, x), m.like(b, 1, x))


def _exp2(b: GraphBuilder, x: Value) -> Value:
    return b.unary(Op.EXP2, x)


def _square(b: GraphBuilder, x: Value) -> Value:
    return m.mul(b, x, x)


def _overloads(names: str, fn: Lowering) -> dict[str, Lowering]:
    """`"aten.add.Tensor aten.add.Scalar"` -> one entry per overload."""
    return dict.fromkeys(names.split(), fn)


OPS: dict[str, Lowering] = {
    **_overloads("aten.add.Tensor aten.add.Scalar", _add),
    **_overloads("aten.sub.Tensor aten.sub.Scalar", _sub),
    **_overloads("aten.rsub.Tensor aten.rsub.Scalar", _rsub),
    **_overloads("aten.mul.Tensor aten.mul.Scalar", _mul),
    **_overloads("aten.div.Tensor aten.div.Scalar aten.div.Tensor_mode aten.div.Scalar_mode", _div),
    **_overloads("aten.pow.Tensor_Scalar aten.pow.Tensor_Tensor aten.pow.Scalar", _pow),
    **_overloads("aten.maximum.default aten.max.other", _binary_out(m.maximum)),
    **_overloads("aten.minimum.default aten.min.other", _binary_out(m.minimum)),
    **_overloads(
        "aten.fmod.Tensor aten.fmod.Scalar", _binary_out(lambda b, x, y: m.mod(b, x, y, True))
    ),
    **_overloads(
        "aten.remainder.Tensor aten.remainder.Scalar",
        _binary_out(lambda b, x, y: m.mod(b, x, y, False)),
    ),
    **_overloads("aten.eq.Tensor aten.eq.Scalar", _compare(m.equal)),
    **_overloads("aten.ne.Tensor aten.ne.Scalar", _compare(_ne)),
    **_overloads("aten.lt.Tensor aten.lt.Scalar", _compare(m.less)),
    **_overloads("aten.gt.Tensor aten.gt.Scalar", _compare(m.greater)),
    **_overloads("aten.le.Tensor aten.le.Scalar", _compare(_le)),
    **_overloads("aten.ge.Tensor aten.ge.Scalar", _compare(_ge)),
    "aten.logical_and.default": _logical(m.logical_and),
    "aten.logical_or.default": _logical(m.logical_or),
    "aten.logical_xor.default": _logical(m.logical_xor),
    "aten.logical_not.default": lambda ctx: m.logical_not(ctx.b, ctx.operand("self", DType.BOOL)),
    **_overloads(
        "aten.bitwise_and.Tensor aten.bitwise_and.Scalar aten.__and__.Tensor",
        _bitwise(m.logical_and),
    ),
    **_overloads(
        "aten.bitwise_or.Tensor aten.bitwise_or.Scalar aten.__or__.Tensor", _bitwise(m.logical_or)
    ),
    **_overloads(
        "aten.bitwise_xor.Tensor aten.bitwise_xor.Scalar aten.__xor__.Tensor",
        _bitwise(m.logical_xor),
    ),
    "aten.bitwise_not.default": _bitwise_not,
    "aten.neg.default": _unary(m.neg, integer_ok=True),
    "aten.abs.default": _unary(m.abs_, integer_ok=True),
    "aten.sign.default": _unary(_sign, integer_ok=True),
    "aten.relu.default": _unary(m.relu, integer_ok=True),
    "aten.exp.default": _unary(m.exp),
    "aten.exp2.default": _unary(_exp2),
    "aten.expm1.default": _unary(_expm1),
    "aten.log.default": _unary(m.log),
    "aten.log2.default": _unary(lambda b, x: b.unary(Op.LOG2, x)),
    "aten.log10.default": _unary(_log_base(math.log10(2.0))),
    "aten.log1p.default": _unary(_log1p),
    "aten.sqrt.default": _unary(m.sqrt),
    "aten.rsqrt.default": _unary(_rsqrt),
    "aten.reciprocal.default": _unary(m.recip),
    "aten.square.default": _unary(_square, integer_ok=True),
    "aten.sin.default": _unary(m.sin),
    "aten.cos.default": _unary(m.cos),
    "aten.tan.default": _unary(_tan),
    "aten.tanh.default": _unary(m.tanh),
    "aten.sigmoid.default": _unary(m.sigmoid),
    "aten.erf.default": _unary(m.erf),
    "aten.silu.default": _unary(_silu),
    "aten.hardsigmoid.default": _unary(_hardsigmoid),
    "aten.hardswish.default": _unary(lambda b, x: m.mul(b, x, _hardsigmoid(b, x))),
    "aten.trunc.default": _unary(trunc, integer_ok=True),
    "aten.floor.default": _unary(floor, integer_ok=True),
    "aten.ceil.default": _unary(ceil, integer_ok=True),
    "aten.gelu.default": _gelu,
    "aten.leaky_relu.default": _leaky_relu,
    "aten.elu.default": _elu,
    "aten.softplus.default": _softplus,
    "aten.hardtanh.default": _hardtanh,
    **_overloads("aten.clamp.default aten.clamp.Tensor", _clamp),
    **_overloads("aten.clamp_min.default aten.clamp_min.Tensor", _clamp_one("min")),
    **_overloads("aten.clamp_max.default aten.clamp_max.Tensor", _clamp_one("max")),
    **_overloads("aten.where.self aten.where.ScalarSelf aten.where.ScalarOther", _where),
    "aten.where.Scalar": _where,
    **_overloads("aten.masked_fill.Scalar aten.masked_fill.Tensor", _masked_fill),
    **_overloads(
        "aten.clone.default aten.alias.default aten.detach.default aten._to_copy.default "
        "aten.lift_fresh_copy.default aten.contiguous.default aten.to.dtype "
        "aten.type_as.default aten.positive.default",
        _copy_to_out,
    ),
    "aten.copy.default": _copy,
}
