"""Write amounts for people: "$1,234.50", "-€3.00", "¥1,235", "1,234.50 USD"."""

from __future__ import annotations

from .money import Money


def format_money(money: Money, *, symbol: bool = True, grouping: bool = True) -> str:
    """The amount with all its decimal places, thousands grouped with commas unless
    ``grouping`` is false, and the currency symbol in front (or the code behind it when
    ``symbol`` is false). A negative amount starts with "-"."""
    places = money.currency.exponent
    number = f"{abs(money.amount):{',' if grouping else ''}.{places}f}"
    sign = "-" if money.amount < 0 else ""
    if symbol:
        return f"{sign}{money.currency.symbol}{number}"
    return f"{sign}{number} {money.currency.code}"
