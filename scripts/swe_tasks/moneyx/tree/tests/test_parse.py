import pytest

from moneyx import Money, MoneyError, UnknownCurrencyError, format_money, parse_money


@pytest.mark.parametrize(
    ("text", "money"),
    [
        ("$1,234.50", Money("1234.50", "USD")),
        ("€3", Money("3", "EUR")),
        ("KD 1.500", Money("1.5", "KWD")),
        ("1234.50 USD", Money("1234.50", "USD")),
        ("12 eur", Money("12", "EUR")),
        ("-3 EUR", Money("-3", "EUR")),
        ("  ¥500  ", Money("500", "JPY")),
    ],
    ids=["symbol", "no-decimals", "spaced-symbol", "code", "lower-code", "negative-code", "pad"],
)
def test_parse_money(text, money):
    assert parse_money(text) == money


@pytest.mark.parametrize(
    "text",
    ["", "12", "$", "1,23 USD", "$1.2.3", "-$-5"],
    ids=["empty", "no-currency", "no-number", "bad-grouping", "two-points", "two-signs"],
)
def test_parse_rejects_non_money(text):
    with pytest.raises(MoneyError):
        parse_money(text)


def test_unknown_symbol():
    with pytest.raises(UnknownCurrencyError, match="'₿'"):
        parse_money("₿5")


@pytest.mark.parametrize(
    "money",
    [Money("1234.5", "USD"), Money("7", "JPY"), Money("0.125", "KWD")],
    ids=["usd", "jpy", "kwd"],
)
def test_format_then_parse_round_trips(money):
    assert parse_money(format_money(money)) == money
    assert parse_money(format_money(money, symbol=False)) == money


@pytest.mark.parametrize(
    ("text", "money"),
    [
        ("-$1,234.50", Money("-1234.50", "USD")),
        ("-€0.99", Money("-0.99", "EUR")),
        ("$-5", Money("-5", "USD")),
    ],
    ids=["sign-first", "euro", "sign-after-symbol"],
)
def test_parse_negative_amounts_with_a_symbol(text, money):
    assert parse_money(text) == money
