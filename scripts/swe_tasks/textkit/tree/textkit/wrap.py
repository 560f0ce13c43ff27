"""Greedy word wrapping by display width."""

from __future__ import annotations

from .width import display_width


def wrap(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` columns, broken at whitespace; a word wider than ``width``
    gets a line of its own. Each newline in ``text`` starts a new line."""
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    lines = []
    for paragraph in text.split("\n"):
        line: list[str] = []
        used = 0
        for word in paragraph.split():
            size = display_width(word)
            if line and used + 1 + size > width:
                lines.append(" ".join(line))
                line, used = [], 0
            used += size + (1 if line else 0)
            line.append(word)
        lines.append(" ".join(line))
    return lines


def fill(text: str, width: int) -> str:
    """``wrap`` joined with newlines."""
    return "\n".join(wrap(text, width))
