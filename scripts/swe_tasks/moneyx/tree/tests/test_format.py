import pytest

from moneyx import Money, format_money, parse_money


@pytest.mark.parametrize(
    ("money", "text"),
    [
        (Money("1234.5", "USD"), "$1,234.50"),
        (Money("0.99", "EUR"), "€0.99"),
        (Money("1234567", "JPY"), "¥1,234,567"),
        (Money("1.5", "KWD"), "KD 1.500"),
        (Money("10", "CHF"), "CHF 10.00"),
    ],
    ids=["usd", "eur", "jpy", "kwd", "chf"],
)
def test_format_money(money, text):
    assert format_money(money) == text


def test_format_without_symbol_or_grouping():
    assert format_money(Money("1234.5", "USD"), symbol=False) == "1,234.50 USD"
    assert format_money(Money("1234.5", "USD"), grouping=False) == "$1234.50"


@pytest.mark.parametrize(
    ("money", "text"),
    [
        (Money("-1234.5", "USD"), "-$1,234.50"),
        (Money("-3", "EUR"), "-€3.00"),
        (Money("-1.5", "KWD"), "-KD 1.500"),
    ],
    ids=["usd", "eur", "kwd"],
)
def test_format_negative_amounts_put_the_sign_first(money, text):
    assert format_money(money) == text
    assert parse_money(text) == money


def test_negative_amounts_without_symbol():
    assert format_money(Money("-5", "USD"), symbol=False) == "-5.00 USD"
