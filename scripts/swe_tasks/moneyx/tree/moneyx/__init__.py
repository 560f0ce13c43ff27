"""moneyx: exact money amounts with currencies: arithmetic, allocation, formatting, conversion."""

from .currency import CURRENCIES, Currency, get_currency
from .errors import CurrencyMismatchError, MoneyError, UnknownCurrencyError
from .exchange import Rates, convert
from .format import format_money
from .money import Money
from .parse import parse_money

__version__ = "0.2.0"

__all__ = [
    "CURRENCIES",
    "Currency",
    "CurrencyMismatchError",
    "Money",
    "MoneyError",
    "Rates",
    "UnknownCurrencyError",
    "convert",
    "format_money",
    "get_currency",
    "parse_money",
]
