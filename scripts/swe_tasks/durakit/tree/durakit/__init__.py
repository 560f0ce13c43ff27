"""durakit: parse and format durations ("1h30m", "2 days, 4 hours", "PT1H30M")."""

from .errors import DurationError
from .format import format_human, format_iso
from .parse import parse, parse_iso

__version__ = "0.3.0"

__all__ = ["DurationError", "format_human", "format_iso", "parse", "parse_iso"]
