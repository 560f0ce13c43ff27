from decimal import Decimal

import pytest

from moneyx import CurrencyMismatchError, Money, MoneyError, UnknownCurrencyError


def test_amounts_are_rounded_half_up_to_cents():
    assert Money("19.995", "USD").amount == Decimal("20.00")
    assert Money("19.994", "USD").amount == Decimal("19.99")
    assert Money(5, "eur").amount == Decimal("5.00")


def test_floats_are_refused():
    with pytest.raises(TypeError, match="not a float"):
        Money(0.1, "USD")


def test_unknown_currency():
    with pytest.raises(UnknownCurrencyError, match="'XYZ'"):
        Money(1, "XYZ")


def test_arithmetic():
    a, b = Money("10.50", "USD"), Money("0.75", "USD")
    assert a + b == Money("11.25", "USD")
    assert a - b == Money("9.75", "USD")
    assert -a == Money("-10.50", "USD")
    assert a * 3 == Money("31.50", "USD")
    assert 2 * b == Money("1.50", "USD")
    assert b < a
    assert a <= a


def test_multiplication_rounds():
    assert Money("10.00", "USD") * Decimal("0.333") == Money("3.33", "USD")


def test_mixing_currencies_is_an_error():
    with pytest.raises(CurrencyMismatchError, match="USD and EUR"):
        Money(1, "USD") + Money(1, "EUR")


def test_minor_units():
    assert Money("19.99", "USD").minor_units == 1999
    assert Money.from_minor(1999, "USD") == Money("19.99", "USD")


def test_repr():
    assert repr(Money("5", "USD")) == "Money('5.00', 'USD')"


def test_allocate_distributes_the_remainder():
    parts = Money("100", "USD").allocate([1, 1, 1])
    assert parts == [Money("33.34", "USD"), Money("33.33", "USD"), Money("33.33", "USD")]


def test_allocate_by_ratio():
    assert Money("10", "USD").allocate([70, 30]) == [Money("7", "USD"), Money("3", "USD")]
    assert Money("0.05", "USD").allocate([3, 7]) == [Money("0.02", "USD"), Money("0.03", "USD")]


def test_split():
    assert Money("0.10", "USD").split(3) == [
        Money("0.04", "USD"),
        Money("0.03", "USD"),
        Money("0.03", "USD"),
    ]


@pytest.mark.parametrize("ratios", [[], [0, 0], [1, -1]], ids=["empty", "zero", "negative"])
def test_allocate_rejects_bad_ratios(ratios):
    with pytest.raises(MoneyError, match="ratios"):
        Money("1", "USD").allocate(ratios)


def test_amounts_are_rounded_to_the_currencys_minor_unit():
    assert Money("1500.50", "JPY").amount == Decimal("1501")
    assert Money("19.999", "KWD").amount == Decimal("19.999")
    assert Money("1.0005", "KWD").amount == Decimal("1.001")


def test_minor_units_of_other_currencies():
    assert Money("1.234", "KWD").minor_units == 1234
    assert Money.from_minor(1500, "KWD") == Money("1.5", "KWD")
    assert Money("1500", "JPY").split(7)[0] == Money("215", "JPY")


@pytest.mark.parametrize(
    ("amount", "ratios", "expected"),
    [
        ("-100", [1, 1, 1], ["-33.34", "-33.33", "-33.33"]),
        ("-0.05", [3, 7], ["-0.02", "-0.03"]),
        ("-0.10", [1, 1, 1], ["-0.04", "-0.03", "-0.03"]),
    ],
    ids=["thirds", "ratio", "cents"],
)
def test_allocate_negative_amounts_adds_up(amount, ratios, expected):
    parts = Money(amount, "USD").allocate(ratios)
    assert parts == [Money(part, "USD") for part in expected]
    assert sum((part.amount for part in parts), Decimal(0)) == Decimal(amount)
