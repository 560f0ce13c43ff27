"""Exceptions raised by inikit; all derive from Error."""

from __future__ import annotations


class Error(Exception):
    """Base class of every inikit error."""


class ParseError(Error):
    """The text is not valid INI; ``lineno`` is 1-based."""

    def __init__(self, message: str, lineno: int, line: str) -> None:
        super().__init__(f"line {lineno}: {message}: {line!r}")
        self.lineno = lineno
        self.line = line


class NoSectionError(Error, LookupError):
    def __init__(self, section: str) -> None:
        super().__init__(f"no section [{section}]")
        self.section = section


class NoOptionError(Error, LookupError):
    def __init__(self, section: str, key: str) -> None:
        super().__init__(f"no option {key!r} in section [{section}]")
        self.section = section
        self.key = key


class InterpolationError(Error):
    """A ``${...}`` reference names a missing option or references loop."""
