"""Parse INI text into sections of ``key = value`` entries.

The syntax::

    ; a comment
    # also a comment
    [section]
    key = value          ; an inline comment needs whitespace before the ; or #
    other: value
    multi = first line
        second line      indented lines continue the previous value
    quoted = "  keeps its spaces # and this too "
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import ParseError

DEFAULT_SECTION = "DEFAULT"
COMMENT_PREFIXES = ("#", ";")

_SECTION = re.compile(r"\[(?P<name>[^\]]+)\]")
_OPTION = re.compile(r"(?P<key>[^=:\s][^=:]*?)\s*[=:]\s*(?P<value>.*)")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


@dataclass
class Entry:
    """One option as written: its value (continuation lines joined by newlines) and line."""

    key: str
    value: str
    lineno: int


@dataclass
class Section:
    name: str
    lineno: int
    entries: dict[str, Entry] = field(default_factory=dict)


def normalize_key(key: str) -> str:
    """Option names are case-insensitive: ``Port`` and ``port`` name the same option."""
    return key.strip().lower()


def strip_inline_comment(value: str) -> str:
    """Drop a trailing ``# comment`` or ``; comment`` from a value."""
    in_quotes = False
    escaped = False
    for index, char in enumerate(value):
        if escaped:
            escaped = False
        elif char == "\\" and in_quotes:
            escaped = True
        elif char == '"':
            in_quotes = not in_quotes
        elif char in "#;" and not in_quotes and (index == 0 or value[index - 1].isspace()):
            return value[:index].rstrip()
    return value.rstrip()


def unquote(value: str) -> str:
    """Return the text inside ``"double quotes"`` with its escapes resolved; a value that is not
    quoted is returned unchanged."""
    if len(value) < 2 or not (value.startswith('"') and value.endswith('"')):
        return value
    out = []
    chars = iter(value[1:-1])
    for char in chars:
        if char == "\\":
            escape = next(chars, "\\")
            out.append(_ESCAPES.get(escape, "\\" + escape))
        else:
            out.append(char)
    return "".join(out)


def _clean(value: str) -> str:
    return unquote(strip_inline_comment(value))


def parse(text: str) -> dict[str, Section]:
    """Parse INI ``text`` into sections by name ([DEFAULT] always present, first).

    Raises ParseError, naming the line, for a line that is neither a section header, an option,
    a comment nor a continuation, and for a repeated section or option.
    """
    sections = {DEFAULT_SECTION: Section(DEFAULT_SECTION, 0)}
    current = sections[DEFAULT_SECTION]
    last: Entry | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            last = None
        elif stripped.startswith(COMMENT_PREFIXES):
            continue
        elif raw[0].isspace() and last is not None:
            part = _clean(stripped)
            last.value = f"{last.value}\n{part}" if last.value else part
        else:
            current, last = _parse_line(stripped, lineno, raw, sections, current)
    return sections


def _parse_line(
    stripped: str, lineno: int, raw: str, sections: dict[str, Section], current: Section
) -> tuple[Section, Entry | None]:
    header = _SECTION.fullmatch(stripped)
    if header:
        name = header.group("name").strip()
        if name in sections and sections[name].lineno:
            raise ParseError(f"section [{name}] already defined", lineno, raw)
        sections.setdefault(name, Section(name, lineno)).lineno = lineno
        return sections[name], None
    option = _OPTION.fullmatch(stripped)
    if option is None:
        raise ParseError("expected '[section]' or 'key = value'", lineno, raw)
    key = normalize_key(option.group("key"))
    if key in current.entries:
        raise ParseError(f"option {key!r} already set in [{current.name}]", lineno, raw)
    entry = Entry(key, _clean(option.group("value")), lineno)
    current.entries[key] = entry
    return current, entry
