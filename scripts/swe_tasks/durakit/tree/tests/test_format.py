from datetime import timedelta

import pytest

from durakit import format_human, format_iso, parse


@pytest.mark.parametrize(
    ("duration", "expected"),
    [
        (timedelta(hours=1, minutes=30), "1 hour, 30 minutes"),
        (timedelta(days=9, seconds=1), "1 week, 2 days, 1 second"),
        (timedelta(minutes=1), "1 minute"),
        (timedelta(0), "0 seconds"),
        (timedelta(seconds=2), "2 seconds"),
    ],
    ids=["hour-minutes", "week-days-second", "minute", "zero", "seconds"],
)
def test_format_human(duration, expected):
    assert format_human(duration) == expected


def test_format_human_short():
    assert format_human(timedelta(hours=26, seconds=5), short=True) == "1d 2h 5s"
    assert format_human(timedelta(0), short=True) == "0s"


def test_format_human_max_units_keeps_the_largest():
    duration = timedelta(days=1, hours=2, minutes=3, seconds=4)
    assert format_human(duration, max_units=2) == "1 day, 2 hours"
    assert format_human(duration, max_units=1, short=True) == "1d"


@pytest.mark.parametrize(
    ("duration", "expected"),
    [
        (timedelta(hours=1, minutes=30), "PT1H30M"),
        (timedelta(days=1, hours=2), "P1DT2H"),
        (timedelta(minutes=1, seconds=30.5), "PT1M30.5S"),
        (timedelta(weeks=1, seconds=1), "P7DT1S"),
    ],
    ids=["hour-minutes", "day-hours", "fraction", "week-second"],
)
def test_format_iso(duration, expected):
    assert format_iso(duration) == expected


@pytest.mark.parametrize(
    "text", ["1h30m", "2 days, 4 hours", "45s", "1w 1d 1h 1m 1s"], ids=["a", "b", "c", "d"]
)
def test_human_round_trip(text):
    assert parse(format_human(parse(text))) == parse(text)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (119.6, "2 minutes"),
        (3599.5, "1 hour"),
        (59.4, "59 seconds"),
        (0.4, "0 seconds"),
        (86399.9, "1 day"),
    ],
    ids=["up-to-minutes", "up-to-hour", "down", "zero", "up-to-day"],
)
def test_format_human_rounds_to_whole_seconds(seconds, expected):
    assert format_human(timedelta(seconds=seconds)) == expected


def test_format_human_short_rounds_too():
    assert format_human(timedelta(minutes=4, seconds=59.7), short=True) == "5m"


@pytest.mark.parametrize(
    ("duration", "human", "iso"),
    [
        (-timedelta(minutes=90), "-1 hour, 30 minutes", "-PT1H30M"),
        (-timedelta(days=2, seconds=5), "-2 days, 5 seconds", "-P2DT5S"),
        (timedelta(seconds=-1), "-1 second", "-PT1S"),
    ],
    ids=["minutes", "days", "second"],
)
def test_negative_durations(duration, human, iso):
    assert format_human(duration) == human
    assert format_iso(duration) == iso
    assert parse(human) == duration
    assert parse(iso) == duration


@pytest.mark.parametrize(
    ("duration", "expected"),
    [
        (timedelta(days=2), "P2D"),
        (timedelta(0), "PT0S"),
        (timedelta(weeks=1), "P7D"),
        (-timedelta(days=1), "-P1D"),
    ],
    ids=["days", "zero", "week", "negative"],
)
def test_format_iso_without_a_time_part(duration, expected):
    assert format_iso(duration) == expected
    assert parse(expected) == duration
