"""Parse durations written for people ("1h30m", "2 days, 4 hours") or in ISO 8601 ("PT1H30M").

A leading ``-`` negates the whole duration: ``-1h30m`` is minus ninety minutes.
"""

from __future__ import annotations

import re
from datetime import timedelta

from .errors import DurationError
from .units import unit_seconds

_NUMBER = r"\d+(?:\.\d+)?"
_PART = re.compile(rf"(?P<value>{_NUMBER})\s*(?P<unit>[a-zA-Z]+)")
_SEPARATOR = re.compile(r"(?:\s|,|\band\b)*")
_ISO = re.compile(
    rf"P(?:(?P<weeks>{_NUMBER})W)?(?:(?P<days>{_NUMBER})D)?"
    rf"(?:T(?:(?P<hours>{_NUMBER})H)?(?:(?P<minutes>{_NUMBER})M)?(?:(?P<seconds>{_NUMBER})S)?)?"
)


def _split_sign(text: str) -> tuple[int, str]:
    body = text.strip()
    if body and body[0] in "+-":
        return (-1 if body[0] == "-" else 1), body[1:].strip()
    return 1, body


def parse(text: str) -> timedelta:
    """Parse "1h30m", "1.5 hours", "2 days, 4 hours and 5 minutes", "90" (seconds), or an ISO
    8601 duration; raise DurationError for anything else."""
    sign, body = _split_sign(text)
    if body.upper().startswith("P"):
        return parse_iso(text)
    if re.fullmatch(_NUMBER, body):
        return timedelta(seconds=sign * float(body))
    total = 0.0
    position = 0
    for match in _PART.finditer(body):
        if not _SEPARATOR.fullmatch(body, position, match.start()):
            break
        total += float(match["value"]) * unit_seconds(match["unit"])
        position = match.end()
    if position == 0 or not _SEPARATOR.fullmatch(body, position):
        raise DurationError(f"not a duration: {text!r}")
    return timedelta(seconds=sign * total)


def parse_iso(text: str) -> timedelta:
    """Parse an ISO 8601 duration such as "P1DT12H", "PT1M30.5S" or "-P2W" (no years or
    months: their length varies)."""
    sign, body = _split_sign(text)
    match = _ISO.fullmatch(body.upper())
    if match is None or body.upper() in ("P", "PT") or body.upper().endswith("T"):
        raise DurationError(f"not an ISO 8601 duration: {text!r}")
    parts = {unit: float(value) for unit, value in match.groupdict().items() if value}
    return sign * timedelta(**parts)
