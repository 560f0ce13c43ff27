"""The ISO 4217 currencies moneyx knows: code, number of decimal places, symbol."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from .errors import UnknownCurrencyError


@dataclass(frozen=True)
class Currency:
    code: str
    exponent: int
    """Decimal places of the minor unit: 2 for cents, 0 for yen, 3 for fils."""
    symbol: str

    @property
    def quantum(self) -> Decimal:
        """The smallest amount: Decimal("0.01") for USD, Decimal("1") for JPY."""
        return Decimal(1).scaleb(-self.exponent)


CURRENCIES = {
    currency.code: currency
    for currency in (
        Currency("USD", 2, "$"),
        Currency("EUR", 2, "€"),
        Currency("GBP", 2, "£"),
        Currency("CHF", 2, "CHF "),
        Currency("JPY", 0, "¥"),
        Currency("KWD", 3, "KD "),
    )
}


def get_currency(code: str | Currency) -> Currency:
    if isinstance(code, Currency):
        return code
    try:
        return CURRENCIES[code.upper()]
    except KeyError:
        raise UnknownCurrencyError(f"unknown currency {code!r}") from None
