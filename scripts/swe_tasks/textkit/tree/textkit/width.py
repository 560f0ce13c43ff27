"""Display width: how many terminal columns text takes.

East Asian wide and fullwidth characters take two columns, combining marks and zero-width
format characters none, everything else one.
"""

from __future__ import annotations

import unicodedata


def char_width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_width(text: str) -> int:
    return sum(char_width(char) for char in text)


def slice_width(text: str, width: int) -> str:
    """The longest prefix of ``text`` that fits in ``width`` columns."""
    used = 0
    for index, char in enumerate(text):
        used += char_width(char)
        if used > width:
            return text[:index]
    return text
