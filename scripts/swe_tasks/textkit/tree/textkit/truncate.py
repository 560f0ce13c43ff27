"""Shorten and pad text to a display width (wide characters count as two columns)."""

from __future__ import annotations

from .width import display_width, slice_width


def truncate(text: str, width: int, suffix: str = "…", *, words: bool = False) -> str:
    """``text`` if it fits in ``width`` columns, else a prefix of it plus ``suffix`` that fits.

    With ``words`` the cut falls between words where there is a space to cut at.
    """
    if width < display_width(suffix):
        raise ValueError(f"width {width} is narrower than the suffix {suffix!r}")
    if display_width(text) <= width:
        return text
    head = slice_width(text, width - display_width(suffix))
    if words and " " in head and not text[len(head)].isspace():
        head = head[: head.rindex(" ")]
    return head.rstrip() + suffix


def pad(text: str, width: int, align: str = "left", fill: str = " ") -> str:
    """``text`` padded with ``fill`` to ``width`` columns (never shortened)."""
    missing = max(0, width - display_width(text))
    if align == "left":
        return text + fill * missing
    if align == "right":
        return fill * missing + text
    if align == "center":
        left = missing // 2
        return fill * left + text + fill * (missing - left)
    raise ValueError(f"align must be 'left', 'right' or 'center', got {align!r}")
