"""Split a template into text, ``{{ expression }}`` and ``{% tag %}`` tokens.

``{# comments #}`` are dropped. Quoted strings inside ``{{ }}`` and ``{% %}`` may contain the
closing delimiter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import TemplateSyntaxError

_START = re.compile(r"\{[{%#]")
_KINDS = {"{{": ("var", "}}"), "{%": ("block", "%}"), "{#": ("comment", "#}")}


@dataclass(frozen=True)
class Token:
    kind: str
    """"text", "var" or "block"."""
    value: str
    line: int


def _find_close(source: str, start: int, close: str) -> int:
    """The index of ``close`` at or after ``start``, skipping quoted strings; -1 if none."""
    quote = ""
    index = start
    while index < len(source):
        char = source[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif source.startswith(close, index):
            return index
        index += 1
    return -1


def tokenize(source: str) -> list[Token]:
    tokens = []
    position = 0
    while match := _START.search(source, position):
        line = source.count("\n", 0, match.start()) + 1
        if match.start() > position:
            text_line = source.count("\n", 0, position) + 1
            tokens.append(Token("text", source[position : match.start()], text_line))
        kind, close = _KINDS[match.group()]
        if kind == "comment":
            end = source.find(close, match.end())
        else:
            end = _find_close(source, match.end(), close)
        if end == -1:
            raise TemplateSyntaxError(f"line {line}: {match.group()} is never closed")
        if kind != "comment":
            tokens.append(Token(kind, source[match.end() : end].strip(), line))
        position = end + len(close)
    if position < len(source):
        tokens.append(Token("text", source[position:], source.count("\n", 0, position) + 1))
    return tokens
