"""Convert between currencies with a table of rates against one base currency."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from .currency import Currency, get_currency
from .errors import MoneyError
from .money import Money


class Rates:
    """``Rates("EUR", {"USD": "1.0825", "JPY": "162.5"})``: one EUR buys 1.0825 USD."""

    def __init__(self, base: str | Currency, rates: Mapping[str, Decimal | int | str]) -> None:
        self.base = get_currency(base)
        self._rates = {get_currency(code).code: Decimal(rate) for code, rate in rates.items()}
        self._rates[self.base.code] = Decimal(1)
        bad = {code: rate for code, rate in self._rates.items() if rate <= 0}
        if bad:
            raise MoneyError(f"rates must be positive, got {bad}")

    def of(self, currency: str | Currency) -> Decimal:
        """How many units of ``currency`` one unit of the base currency buys."""
        code = get_currency(currency).code
        try:
            return self._rates[code]
        except KeyError:
            raise MoneyError(f"no rate for {code} (base {self.base.code})") from None

    def rate(self, source: str | Currency, target: str | Currency) -> Decimal:
        """How many units of ``target`` one unit of ``source`` buys."""
        return self.of(target) / self.of(source)


def convert(money: Money, to: str | Currency, rates: Rates) -> Money:
    """``money`` in currency ``to``, rounded once, to the target's minor unit."""
    target = get_currency(to)
    return Money(money.amount * rates.rate(money.currency, target), target)
