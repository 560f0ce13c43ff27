import pytest

from durakit import DurationError
from durakit.units import UNITS, unit_seconds


@pytest.mark.parametrize(
    ("word", "seconds"),
    [("w", 604800), ("days", 86400), ("Hr", 3600), ("mins", 60), ("SECOND", 1)],
)
def test_unit_spellings(word, seconds):
    assert unit_seconds(word) == seconds


def test_units_are_largest_first():
    sizes = [size for _, _, size in UNITS]
    assert sizes == sorted(sizes, reverse=True)


def test_unknown_unit():
    with pytest.raises(DurationError, match="unknown unit 'lightyears'"):
        unit_seconds("lightyears")
