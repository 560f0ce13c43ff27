"""Duration units: names, short symbols, accepted spellings and sizes in seconds."""

from __future__ import annotations

from .errors import DurationError

# Largest first: formatting walks them in this order.
UNITS: tuple[tuple[str, str, int], ...] = (
    ("week", "w", 604800),
    ("day", "d", 86400),
    ("hour", "h", 3600),
    ("minute", "m", 60),
    ("second", "s", 1),
)

_SPELLINGS = {
    "week": ("w", "wk", "wks", "week", "weeks"),
    "day": ("d", "day", "days"),
    "hour": ("h", "hr", "hrs", "hour", "hours"),
    "minute": ("m", "min", "mins", "minute", "minutes"),
    "second": ("s", "sec", "secs", "second", "seconds"),
}
_SIZES = {name: size for name, _, size in UNITS}
_BY_SPELLING = {spelling: name for name, words in _SPELLINGS.items() for spelling in words}


def unit_seconds(word: str) -> int:
    """The size in seconds of the unit spelled ``word`` ("h", "hours", "Min", ...)."""
    name = _BY_SPELLING.get(word.lower())
    if name is None:
        raise DurationError(f"unknown unit {word!r}")
    return _SIZES[name]
