"""Format durations for people ("1 hour, 30 minutes", "1h 30m") and as ISO 8601 ("PT1H30M")."""

from __future__ import annotations

from datetime import timedelta

from .units import UNITS


def _sign_and_seconds(duration: timedelta) -> tuple[str, float]:
    total = duration.total_seconds()
    return ("-" if total < 0 else ""), abs(total)


def _number(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".")


def format_human(duration: timedelta, *, short: bool = False, max_units: int | None = None) -> str:
    """Write "1 hour, 30 minutes" (or "1h 30m" when ``short``), rounded to whole seconds.

    ``max_units`` keeps only that many of the largest non-zero units. A zero duration is
    "0 seconds" ("0s").
    """
    sign, seconds = _sign_and_seconds(duration)
    remaining = round(seconds)
    parts = []
    for name, symbol, size in UNITS:
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{symbol}" if short else _plural(count, name))
    if max_units is not None:
        parts = parts[:max_units]
    if not parts:
        return "0s" if short else "0 seconds"
    return sign + (" " if short else ", ").join(parts)


def _plural(count: int, name: str) -> str:
    return f"{count} {name}" if count == 1 else f"{count} {name}s"


def format_iso(duration: timedelta) -> str:
    """The ISO 8601 form: "P1DT2H", "PT1M30.5S", "-PT5M"; zero is "PT0S"."""
    sign, seconds = _sign_and_seconds(duration)
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    date = f"{int(days)}D" if days else ""
    time = "".join(f"{int(value)}{unit}" for value, unit in ((hours, "H"), (minutes, "M")) if value)
    if seconds:
        time += f"{_number(seconds)}S"
    if not date and not time:
        return "PT0S"
    return f"{sign}P{date}" + (f"T{time}" if time else "")
