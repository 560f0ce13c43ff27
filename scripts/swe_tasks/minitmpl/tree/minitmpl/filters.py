"""The built-in filters and HTML escaping."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .expr import UNDEFINED

_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#39;"))


class Markup(str):
    """Text that is already safe HTML: printing it does not escape it again."""


def escape(value: Any) -> Markup:
    if isinstance(value, Markup):
        return value
    text = str(value)
    for char, entity in _ESCAPES:
        text = text.replace(char, entity)
    return Markup(text)


def default(value: Any, fallback: Any = "") -> Any:
    """``fallback`` when the value is undefined or None."""
    return fallback if value is UNDEFINED or value is None else value


def join(value: Iterable[Any], separator: str = "") -> str:
    return separator.join(str(item) for item in value)


def truncate(value: Any, length: int, suffix: str = "...") -> str:
    text = str(value)
    return text if len(text) <= length else text[: max(0, length - len(suffix))] + suffix


FILTERS: dict[str, Callable[..., Any]] = {
    "default": default,
    "escape": escape,
    "join": join,
    "length": len,
    "lower": lambda value: str(value).lower(),
    "safe": lambda value: Markup(value),
    "title": lambda value: str(value).title(),
    "trim": lambda value: str(value).strip(),
    "truncate": truncate,
    "upper": lambda value: str(value).upper(),
}
