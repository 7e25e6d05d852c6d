"""Value-based pricing: the vendor is paid a share of the measured savings.

For a device that costs `price_per_hour` and a compiled model that runs `speedup` times
faster than the customer's baseline, the same work needs `1/speedup` of the device time::

    savings_rate = price_per_hour x (1 - 1/speedup)     if speedup > 1, else 0
    fee_rate     = share x savings_rate
    customer keeps savings_rate - fee_rate

The speedup billed is the lower confidence bound of the measured speedup (the license's
billing basis), so measurement noise never bills the customer for savings they may not have.

Arithmetic is `decimal.Decimal` in a private context of 50 significant digits; shares may
be written as fractions (`"1/3"`), kept exact until the end.  Rounding happens once, on
the final amounts, to the currency's minor unit (2 places; 0 for JPY and KRW) with
ROUND_HALF_UP; `customer_keeps` is the rounded savings less the rounded fee, so the three
printed numbers always add up.  Rates and amounts are never rounded in between.

Worked example (the contract's): $1.50/h, speedup 2.0, share 1/3 -> savings $0.75/h,
fee $0.25/h, the customer keeps $0.50/h.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation, localcontext

from luminal.errors import UsageError

PRECISION = 50
_ZERO_DECIMAL_CURRENCIES = frozenset({"JPY", "KRW", "CLP", "ISK", "VND"})


def to_decimal(value: Decimal | int | str, field: str) -> Decimal:
    """A finite Decimal from a Decimal, int or text (`"1.50"`, `"1/3"`); floats are refused."""
    if isinstance(value, float):
        raise UsageError(f"{field}: pass {value!r} as text or Decimal, not float")
    with localcontext(Context(prec=PRECISION)):
        try:
            if isinstance(value, str) and "/" in value:
                num, den = value.split("/", 1)
                result = Decimal(num.strip()) / Decimal(den.strip())
            else:
                result = Decimal(value)
        except (InvalidOperation, ValueError, ZeroDivisionError):
            raise UsageError(f"{field}: not a number: {value!r}") from None
    if not result.is_finite():
        raise UsageError(f"{field}: not a finite number: {value!r}")
    return result


def minor_unit(currency: str) -> Decimal:
    """The smallest amount of `currency` an invoice shows (0.01, or 1 for JPY and the like)."""
    return Decimal(1) if currency.upper() in _ZERO_DECIMAL_CURRENCIES else Decimal("0.01")


def round_money(amount: Decimal, currency: str) -> Decimal:
    return amount.quantize(minor_unit(currency), rounding=ROUND_HALF_UP)


def savings_rate(price_per_hour: Decimal, speedup: Decimal) -> Decimal:
    """Savings per device-hour of baseline work; 0 when the speedup is at or below 1."""
    if price_per_hour < 0:
        raise UsageError(f"price per hour must be >= 0, got {price_per_hour}")
    if speedup <= 0:
        raise UsageError(f"speedup must be > 0, got {speedup}")
    if speedup <= 1:
        return Decimal(0)
    with localcontext(Context(prec=PRECISION)):
        return price_per_hour * (1 - 1 / speedup)


def fee_rate(share: Decimal, savings: Decimal) -> Decimal:
    check_share(share)
    with localcontext(Context(prec=PRECISION)):
        return share * savings


def check_share(share: Decimal) -> Decimal:
    if not 0 <= share <= 1:
        raise UsageError(f"share must be between 0 and 1, got {share}")
    return share


@dataclass(frozen=True)
class Quote:
    """What `hours` of baseline device time save and cost, rounded for the invoice."""

    currency: str
    price_per_hour: Decimal
    speedup: Decimal
    share: Decimal
    hours: Decimal
    savings: Decimal
    fee: Decimal
    customer_keeps: Decimal

    def to_json(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.__dict__.items()}


def quote(
    price_per_hour: Decimal | int | str,
    speedup: Decimal | int | str,
    share: Decimal | int | str,
    *,
    hours: Decimal | int | str = 1,
    currency: str = "USD",
) -> Quote:
    """Savings, fee and what the customer keeps for `hours` of device time.

    The fee statement (`metering.usage.statement`) bills the device-hours the compiled
    model was measured using: savings = hours x price x (1 - 1/speedup), the savings
    rate the license's terms price (issue 15: "device-hours used x savings rate x share").

    `speedup` should be the lower confidence bound of the measured speedup (billing basis).
    """
    price = to_decimal(price_per_hour, "price per hour")
    s = to_decimal(speedup, "speedup")
    sh = check_share(to_decimal(share, "share"))
    h = to_decimal(hours, "hours")
    if h < 0:
        raise UsageError(f"hours must be >= 0, got {h}")
    with localcontext(Context(prec=PRECISION)):
        savings_exact = savings_rate(price, s) * h
        fee_exact = fee_rate(sh, savings_exact)
    savings = round_money(savings_exact, currency)
    fee = round_money(fee_exact, currency)
    return Quote(currency.upper(), price, s, sh, h, savings, fee, savings - fee)
