"""The op-to-code table the C and Triton printers share (`backends/exprs.py`).

The printers' output is checked end to end against the reference interpreter by the
backend op tests (`test_cpu_ops.py`, `triton/test_onnx_ops.py`); here: that both tables
cover every op the kernel writers hand them, that a shared entry speaks the printer's own
literals, and that a reduction's identity really is one.
"""

from __future__ import annotations

import numpy as np
import pytest

from luminal.compiler.backends import exprs
from luminal.compiler.backends.cpu import cexpr
from luminal.compiler.backends.triton import texpr
from luminal.compiler.ir import DType, Op
from luminal.compiler.ir.ops import BINARY, UNARY
from luminal.errors import UnsupportedOp

#: What the kernel writers print through the table (a cast has its own printer).
PRINTED = (UNARY - {Op.CAST}) | BINARY


@pytest.mark.parametrize("printer", [cexpr.C, texpr.TRITON], ids=lambda p: p.language)
def test_every_printer_spells_every_elementwise_op(printer: exprs.Printer) -> None:
    assert set(printer.code_for_op) == PRINTED
    for op in PRINTED:
        operands = ("a", "b")[: 1 if op in UNARY else 2]
        dtype = DType.I32 if op is Op.IDIV else DType.F32
        text = printer.render(op, dtype, *operands)
        assert all(x in text for x in operands), (op, text)


def test_each_language_overrides_only_what_it_spells_its_own_way() -> None:
    shared = exprs.CODE_FOR_OP
    c, t = cexpr.CODE_FOR_OP, texpr.CODE_FOR_OP
    assert {op for op in shared if c[op] is shared[op]} == {Op.RECIP, Op.ADD, Op.MUL}
    assert {op for op in shared if t[op] is shared[op]} == {Op.ADD, Op.MUL, Op.CMPLT, Op.CMPEQ}
    for dtype, add, mul in [(DType.BOOL, "|", "&"), (DType.I32, "+", "*")]:
        for m in (cexpr, texpr):
            assert m.binary(Op.ADD, dtype, "a", "b") == f"(a {add} b)"
            assert m.binary(Op.MUL, dtype, "a", "b") == f"(a {mul} b)"


def test_a_shared_entry_speaks_the_printers_literals() -> None:
    printer = exprs.Printer("X", lambda v, t: f"<{v!r}:{t.value}>", exprs.CODE_FOR_OP)
    assert printer.render(Op.RECIP, DType.F64, "x") == "(<1.0:f64> / x)"
    assert cexpr.unary(Op.RECIP, DType.F32, "x") == f"({cexpr.literal(1.0, DType.F32)} / x)"
    assert texpr.unary(Op.RECIP, DType.F64, "x") == f"({texpr.literal(1.0, DType.F64)} / x)"
    # Triton's own spelling: correctly rounded f32 division
    assert texpr.unary(Op.RECIP, DType.F32, "x").startswith("tl.div_rn(")


def test_an_op_without_a_spelling_or_with_the_wrong_operands_is_refused() -> None:
    with pytest.raises(UnsupportedOp, match="C has no spelling of where"):
        cexpr.C.render(Op.WHERE, DType.F32, "c", "a", "b")
    with pytest.raises(TypeError, match="add takes 2 operands, not 1"):
        texpr.TRITON.render(Op.ADD, DType.F32, "a")
    with pytest.raises(UnsupportedOp, match="not a reduction"):
        exprs.identity(Op.ADD, DType.F32)


@pytest.mark.parametrize("dtype", [d for d in DType if d is not DType.BF16], ids=str)
def test_a_reductions_identity_leaves_every_value_unchanged(dtype: DType) -> None:
    """The interpreter reduces with np.sum and np.max: starting either from `identity`
    changes no value of the type, down to its least one (and NaN stays NaN)."""
    if dtype.is_float:
        info = np.finfo(dtype.np)
        values = np.array([-np.inf, info.min, -1.5, 0.0, info.max, np.inf, np.nan], dtype.np)
    elif dtype is DType.BOOL:
        values = np.array([False, True])
    else:
        info = np.iinfo(dtype.np)
        values = np.array([info.min, 0, 1, info.max], dtype.np)
    start_max = np.asarray(exprs.identity(Op.RMAX, dtype)).astype(dtype.np)
    start_sum = np.asarray(exprs.identity(Op.SUM, dtype)).astype(dtype.np)
    np.testing.assert_array_equal(np.maximum(start_max, values), values)
    np.testing.assert_array_equal((values + start_sum).astype(dtype.np), values)
