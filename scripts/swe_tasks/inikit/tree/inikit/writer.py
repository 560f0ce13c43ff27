"""Write a Config as INI text that reads back to the same values."""

from __future__ import annotations

from typing import TextIO

from .config import Config
from .parser import COMMENT_PREFIXES, DEFAULT_SECTION

CONTINUATION = "\n    "


def _needs_quotes(line: str) -> bool:
    return (
        line != line.strip()
        or line.startswith('"')
        or any(prefix in line for prefix in COMMENT_PREFIXES)
    )


def format_line(line: str) -> str:
    """One line of a value as it must be written to read back unchanged."""
    if not _needs_quotes(line):
        return line
    escaped = line.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def format_value(value: str) -> str:
    """A value's text after ``key = ``: multi-line values use indented continuation lines."""
    return CONTINUATION.join(format_line(line) for line in value.split("\n"))


def dumps(config: Config) -> str:
    """The whole config as INI text; [DEFAULT] first when it has options."""
    blocks = []
    for name in [DEFAULT_SECTION, *config.sections()]:
        items = config.own_items(name)
        if name == DEFAULT_SECTION and not items:
            continue
        lines = [f"[{name}]"] + [f"{key} = {format_value(value)}" for key, value in items]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def dump(config: Config, stream: TextIO) -> None:
    stream.write(dumps(config))
