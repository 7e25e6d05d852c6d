"""Value-based pricing: the contract's worked example and the edges."""

from __future__ import annotations

from decimal import Decimal

import pytest

from luminal.errors import UsageError
from luminal.licensing.pricing import quote, savings_rate


def test_contract_worked_example() -> None:
    q = quote("1.50", "2.0", "1/3")
    assert q.savings == Decimal("0.75")
    assert q.fee == Decimal("0.25")
    assert q.customer_keeps == Decimal("0.50")
    assert q.to_json()["fee"] == "0.25"


def test_no_fee_at_or_below_speedup_one() -> None:
    for speedup in ("1", "0.8"):
        q = quote("1.50", speedup, "1/3")
        assert q.savings == q.fee == q.customer_keeps == Decimal("0.00")


def test_rounding_is_once_at_the_end_half_up_to_the_minor_unit() -> None:
    # 1000 h at $1.50/h, speedup 3: savings = 1000 * 1.50 * 2/3 = 1000.00 exactly
    q = quote("1.50", "3", "1/3", hours=1000)
    assert (q.savings, q.fee, q.customer_keeps) == (
        Decimal("1000.00"),
        Decimal("333.33"),
        Decimal("666.67"),
    )
    assert q.fee + q.customer_keeps == q.savings
    # half-up: 0.125 -> 0.13
    assert quote("0.25", "2", "1", hours="1").savings == Decimal("0.13")
    assert quote("150", "2", "1/3", currency="JPY").fee == Decimal("25")
    assert savings_rate(Decimal("1.50"), Decimal("1.5")) == Decimal(
        "0.5000000000000000000000000000000000000000000000000"
    )


def test_bad_inputs_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="share must be between 0 and 1"):
        quote("1.50", "2", "4/3")
    with pytest.raises(UsageError, match="not float"):
        quote(1.5, "2", "1/3")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="price per hour must be >= 0"):
        quote("-1", "2", "1/3")
    with pytest.raises(UsageError, match="not a number"):
        quote("1.50", "fast", "1/3")
