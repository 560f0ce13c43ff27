from datetime import timedelta

import pytest

from durakit import DurationError, parse, parse_iso


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2 days, 4 hours and 5 minutes", timedelta(days=2, hours=4, minutes=5)),
        ("1w", timedelta(weeks=1)),
        ("45 secs", timedelta(seconds=45)),
        ("3 Hours", timedelta(hours=3)),
        ("90", timedelta(seconds=90)),
        ("2.5", timedelta(seconds=2.5)),
        ("  10m  ", timedelta(minutes=10)),
    ],
    ids=["compact", "words", "week", "secs", "capitalised", "bare", "bare-decimal", "padded"],
)
def test_parse(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "abc", "10 parsecs", "1h xyz 30m", "h"],
    ids=["empty", "word", "unknown-unit", "junk-between", "unit-only"],
)
def test_parse_rejects_garbage(text):
    with pytest.raises(DurationError):
        parse(text)


def test_unknown_unit_is_named():
    with pytest.raises(DurationError, match="unknown unit 'fortnights'"):
        parse("2 fortnights")


def test_duration_error_is_a_value_error():
    assert issubclass(DurationError, ValueError)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT1H30M", timedelta(hours=1, minutes=30)),
        ("P1DT12H", timedelta(days=1, hours=12)),
        ("P2W", timedelta(weeks=2)),
        ("PT1M30.5S", timedelta(minutes=1, seconds=30.5)),
        ("pt5m", timedelta(minutes=5)),
    ],
    ids=["hours-minutes", "days-hours", "weeks", "fraction", "lowercase"],
)
def test_parse_iso(text, expected):
    assert parse_iso(text) == expected
    assert parse(text) == expected


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "PT1H2D", "P1Y", "1H"])
def test_parse_iso_rejects_invalid(text):
    with pytest.raises(DurationError, match="not an ISO 8601 duration"):
        parse_iso(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5h", timedelta(minutes=90)),
        ("0.25 days", timedelta(hours=6)),
        ("1h 0.5m", timedelta(hours=1, seconds=30)),
    ],
    ids=["hours", "days", "minutes"],
)
def test_parse_fractional_values(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-1h30m", -timedelta(hours=1, minutes=30)),
        ("- 2 days, 4 hours", -timedelta(days=2, hours=4)),
        ("+5m", timedelta(minutes=5)),
        ("-90", timedelta(seconds=-90)),
        ("-P1DT2H", -timedelta(days=1, hours=2)),
    ],
    ids=["compact", "words", "plus", "bare", "iso"],
)
def test_leading_sign_applies_to_the_whole_duration(text, expected):
    assert parse(text) == expected


def test_sign_inside_a_duration_is_rejected():
    with pytest.raises(DurationError):
        parse("1h -30m")
