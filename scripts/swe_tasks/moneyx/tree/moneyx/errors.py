"""moneyx's exceptions; all are ValueErrors."""


class MoneyError(ValueError):
    """An invalid amount, operation or text."""


class UnknownCurrencyError(MoneyError):
    """A currency code or symbol moneyx does not know."""


class CurrencyMismatchError(MoneyError):
    """An operation on amounts in two different currencies."""
