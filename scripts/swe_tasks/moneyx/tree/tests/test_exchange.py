import pytest

from moneyx import Money, MoneyError, Rates, convert

RATES = Rates("EUR", {"USD": "1.0825", "JPY": "162.5", "KWD": "0.3335", "GBP": "0.8412"})


def test_convert_from_the_base_currency():
    assert convert(Money("100", "EUR"), "USD", RATES) == Money("108.25", "USD")
    assert convert(Money("100", "EUR"), "JPY", RATES) == Money("16250", "JPY")


def test_convert_to_the_base_currency():
    assert convert(Money("108.25", "USD"), "EUR", RATES) == Money("100", "EUR")


def test_convert_to_the_same_currency():
    assert convert(Money("5", "USD"), "USD", RATES) == Money("5", "USD")


def test_missing_rate():
    with pytest.raises(MoneyError, match="no rate for CHF"):
        convert(Money("1", "CHF"), "EUR", RATES)


def test_rates_must_be_positive():
    with pytest.raises(MoneyError, match="positive"):
        Rates("EUR", {"USD": 0})


@pytest.mark.parametrize(
    ("money", "target", "expected"),
    [
        (Money("10000", "JPY"), "KWD", Money("20.523", "KWD")),
        (Money("250", "GBP"), "JPY", Money("48294", "JPY")),
        (Money("77777", "JPY"), "USD", Money("518.11", "USD")),
        (Money("999.99", "USD"), "GBP", Money("777.08", "GBP")),
    ],
    ids=["jpy-kwd", "gbp-jpy", "jpy-usd", "usd-gbp"],
)
def test_cross_conversion_rounds_once(money, target, expected):
    assert convert(money, target, RATES) == expected
