"""Money: an exact amount in a currency, rounded to the currency's minor unit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from .currency import Currency, get_currency
from .errors import CurrencyMismatchError, MoneyError


@dataclass(frozen=True, init=False)
class Money:
    """``Money("19.99", "USD")``. Amounts are Decimals rounded half-up to the currency's minor
    unit (cents, yen, fils) on creation and after every multiplication; floats are refused."""

    amount: Decimal
    currency: Currency

    def __init__(self, amount: Decimal | int | str, currency: str | Currency) -> None:
        if isinstance(amount, float):
            raise TypeError("use a Decimal, int or str amount, not a float")
        resolved = get_currency(currency)
        value = Decimal(amount).quantize(resolved.quantum, rounding=ROUND_HALF_UP)
        object.__setattr__(self, "amount", value)
        object.__setattr__(self, "currency", resolved)

    @classmethod
    def from_minor(cls, units: int, currency: str | Currency) -> Money:
        """``Money.from_minor(1999, "USD")`` is $19.99."""
        resolved = get_currency(currency)
        return cls(Decimal(units).scaleb(-resolved.exponent), resolved)

    @property
    def minor_units(self) -> int:
        return int(self.amount.scaleb(self.currency.exponent))

    def __repr__(self) -> str:
        return f"Money('{self.amount}', '{self.currency.code}')"

    def _same(self, other: object) -> Money:
        if not isinstance(other, Money):
            raise TypeError(f"expected Money, got {type(other).__name__}")
        if other.currency != self.currency:
            raise CurrencyMismatchError(f"{self.currency.code} and {other.currency.code}")
        return other

    def __add__(self, other: Money) -> Money:
        return Money(self.amount + self._same(other).amount, self.currency)

    def __sub__(self, other: Money) -> Money:
        return Money(self.amount - self._same(other).amount, self.currency)

    def __neg__(self) -> Money:
        return Money(-self.amount, self.currency)

    def __mul__(self, factor: int | Decimal) -> Money:
        if isinstance(factor, float):
            raise TypeError("multiply by a Decimal or int, not a float")
        return Money(self.amount * factor, self.currency)

    __rmul__ = __mul__

    def __lt__(self, other: Money) -> bool:
        return self.amount < self._same(other).amount

    def __le__(self, other: Money) -> bool:
        return self.amount <= self._same(other).amount

    def allocate(self, ratios: Sequence[int | Decimal]) -> list[Money]:
        """Parts proportional to ``ratios`` that add up to exactly this amount; the minor units
        left over go one each to the first parts."""
        if not ratios or any(ratio < 0 for ratio in ratios) or sum(ratios) <= 0:
            raise MoneyError(f"ratios must be >= 0 with a positive sum, got {list(ratios)}")
        units = self.minor_units
        total = Decimal(sum(ratios))
        shares = [int(units * Decimal(ratio) / total) for ratio in ratios]
        remainder = units - sum(shares)
        step = 1 if remainder > 0 else -1
        for index in range(abs(remainder)):
            shares[index] += step
        return [Money.from_minor(share, self.currency) for share in shares]

    def split(self, parts: int) -> list[Money]:
        """``parts`` nearly equal parts that add up to this amount."""
        if parts < 1:
            raise MoneyError(f"parts must be at least 1, got {parts}")
        return self.allocate([1] * parts)
