"""Config: typed, case-insensitive access to parsed INI sections, with ${...} interpolation."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .errors import NoOptionError, NoSectionError
from .interpolate import interpolate
from .parser import DEFAULT_SECTION, Entry, Section, normalize_key, parse

T = TypeVar("T")

BOOLEAN_STATES = {
    "1": True,
    "yes": True,
    "true": True,
    "on": True,
    "0": False,
    "no": False,
    "false": False,
    "off": False,
}

_MISSING: Any = object()
_LIST_SEPARATOR = re.compile(r"[,\n]")


def _to_bool(value: str) -> bool:
    try:
        return BOOLEAN_STATES[value.strip().lower()]
    except KeyError:
        raise ValueError(f"not a boolean: {value!r}") from None


def _to_list(value: str) -> list[str]:
    return [item.strip() for item in _LIST_SEPARATOR.split(value) if item.strip()]


class Config:
    """Sections of options. Options of [DEFAULT] are visible in every other section."""

    def __init__(self, sections: dict[str, Section] | None = None) -> None:
        self._sections = sections or {DEFAULT_SECTION: Section(DEFAULT_SECTION, 0)}

    @classmethod
    def from_string(cls, text: str) -> Config:
        return cls(parse(text))

    # --- structure ---------------------------------------------------------------------

    def sections(self) -> list[str]:
        """Section names in file order, without [DEFAULT]."""
        return [name for name in self._sections if name != DEFAULT_SECTION]

    def has_section(self, name: str) -> bool:
        return name in self._sections

    def add_section(self, name: str) -> None:
        if name in self._sections:
            raise ValueError(f"section [{name}] already exists")
        self._sections[name] = Section(name, 0)

    def options(self, section: str) -> list[str]:
        """The section's option names followed by the [DEFAULT] ones it does not override."""
        own = list(self._section(section).entries)
        defaults = self._sections[DEFAULT_SECTION].entries
        return own + [key for key in defaults if key not in own]

    def own_items(self, section: str) -> list[tuple[str, str]]:
        """The options written in ``section`` itself, raw (not interpolated)."""
        return [(key, entry.value) for key, entry in self._section(section).entries.items()]

    def has_option(self, section: str, key: str) -> bool:
        try:
            self.raw(section, key)
        except LookupError:
            return False
        return True

    def items(self, section: str) -> list[tuple[str, str]]:
        return [(key, self.get(section, key)) for key in self.options(section)]

    def set(self, section: str, key: str, value: str) -> None:
        entries = self._section(section).entries
        entries[normalize_key(key)] = Entry(normalize_key(key), value, 0)

    def remove_option(self, section: str, key: str) -> bool:
        return self._section(section).entries.pop(normalize_key(key), None) is not None

    # --- values ------------------------------------------------------------------------

    def raw(self, section: str, key: str) -> str:
        """The value as written (before interpolation), falling back to [DEFAULT]."""
        name = normalize_key(key)
        entry = self._section(section).entries.get(name)
        if entry is None:
            entry = self._sections[DEFAULT_SECTION].entries.get(name)
        if entry is None:
            raise NoOptionError(section, key)
        return entry.value

    def get(self, section: str, key: str, fallback: Any = _MISSING, *, raw: bool = False) -> Any:
        """The option's value with ``${...}`` expanded (unless ``raw``); ``fallback`` when the
        option is missing, else NoOptionError (NoSectionError for a missing section)."""
        try:
            value = self.raw(section, key)
        except NoOptionError:
            if fallback is _MISSING:
                raise
            return fallback
        return value if raw else interpolate(value, section, self.raw)

    def getint(self, section: str, key: str, fallback: Any = _MISSING) -> Any:
        return self._convert(section, key, fallback, int)

    def getfloat(self, section: str, key: str, fallback: Any = _MISSING) -> Any:
        return self._convert(section, key, fallback, float)

    def getboolean(self, section: str, key: str, fallback: Any = _MISSING) -> Any:
        """``1/yes/true/on`` or ``0/no/false/off``; ValueError otherwise."""
        return self._convert(section, key, fallback, _to_bool)

    def getlist(self, section: str, key: str, fallback: Any = _MISSING) -> Any:
        """Items separated by commas or newlines, stripped, empty ones dropped."""
        return self._convert(section, key, fallback, _to_list)

    def _convert(self, section: str, key: str, fallback: Any, convert: Callable[[str], T]) -> Any:
        value = self.get(section, key, fallback=_MISSING if fallback is _MISSING else None)
        if value is None:
            return fallback
        return convert(value)

    def _section(self, name: str) -> Section:
        try:
            return self._sections[name]
        except KeyError:
            raise NoSectionError(name) from None


def loads(text: str) -> Config:
    """Parse INI text."""
    return Config.from_string(text)


def load(path: str | Path, encoding: str = "utf-8") -> Config:
    """Parse an INI file."""
    return loads(Path(path).read_text(encoding=encoding))
