"""Read amounts written as format_money writes them, or as people commonly do."""

from __future__ import annotations

import re
from decimal import Decimal

from .currency import CURRENCIES, Currency, get_currency
from .errors import MoneyError, UnknownCurrencyError
from .money import Money

_SYMBOLS = {currency.symbol.strip(): currency for currency in CURRENCIES.values()}
_NUMBER = r"(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_WITH_SYMBOL = re.compile(rf"(?P<sign>-)?(?P<symbol>[^\d\s.,-]+)\s?(?P<inner>-)?{_NUMBER}")
_WITH_CODE = re.compile(rf"(?P<sign>-)?{_NUMBER}\s*(?P<code>[A-Za-z]{{3}})")


def parse_money(text: str) -> Money:
    """Read "$1,234.50", "-$5", "KD 1.500", "1234.50 USD" or "-3 eur"."""
    stripped = text.strip()
    match = _WITH_SYMBOL.fullmatch(stripped)
    currency: Currency
    if match:
        if match["sign"] and match["inner"]:
            raise MoneyError(f"two signs in {text!r}")
        symbol = match["symbol"]
        if symbol not in _SYMBOLS:
            raise UnknownCurrencyError(f"unknown currency symbol {symbol!r} in {text!r}")
        currency = _SYMBOLS[symbol]
        negative = bool(match["sign"] or match["inner"])
    else:
        match = _WITH_CODE.fullmatch(stripped)
        if match is None:
            raise MoneyError(f"not an amount of money: {text!r}")
        currency = get_currency(match["code"])
        negative = bool(match["sign"])
    amount = Decimal(match["number"].replace(",", ""))
    return Money(-amount if negative else amount, currency)
