"""Expressions: a value (a dotted name, a string or a number) and ``|filter(args)`` calls.

``user.name`` reads the key or attribute ``name`` of ``user``. A name that does not resolve
gives UNDEFINED: falsy, empty when iterated, replaced by ``|default``, and an error when
printed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import TemplateSyntaxError

_FILTER = re.compile(r"(?P<name>\w+)\s*(?:\((?P<args>.*)\))?", re.S)
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")


class Undefined:
    """The value of a name that is not in the context."""

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Any:
        return iter(())

    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED = Undefined()


def split_outside_quotes(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` where it is not inside a quoted string."""
    parts, current, quote = [], [], ""
    chars = iter(text)
    for char in chars:
        if quote and char == "\\":
            current.append(char + next(chars, ""))
            continue
        if char in "\"'" and (not quote or quote == char):
            quote = "" if quote else char
        if char == separator and not quote:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def literal(text: str) -> Any:
    """A string, number, true, false or none written in a template."""
    words = {"true": True, "false": False, "none": None}
    if text in words:
        return words[text]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise TemplateSyntaxError(f"not a literal: {text!r}") from None
    if not isinstance(value, str | int | float):
        raise TemplateSyntaxError(f"not a literal: {text!r}")
    return value


def lookup(path: str, context: Mapping[str, Any]) -> Any:
    """The value of dotted name ``path``: keys, attributes or list indexes, else UNDEFINED."""
    first, *rest = path.split(".")
    current = context.get(first, UNDEFINED)
    for part in rest:
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, Sequence) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        elif not isinstance(current, Undefined) and hasattr(current, part):
            current = getattr(current, part)
        else:
            return UNDEFINED
    return current


@dataclass(frozen=True)
class Expression:
    source: str
    value: str
    filters: tuple[tuple[str, tuple[Any, ...]], ...]

    def evaluate(self, context: Mapping[str, Any], filters: Mapping[str, Callable]) -> Any:
        result = lookup(self.value, context) if _NAME.fullmatch(self.value) else literal(self.value)
        for name, args in self.filters:
            result = filters[name](result, *args)
        return result


def parse_expression(text: str, known_filters: Mapping[str, Callable]) -> Expression:
    value, *calls = (part.strip() for part in split_outside_quotes(text, "|"))
    if not value:
        raise TemplateSyntaxError(f"empty expression: {text!r}")
    filters = []
    for call in calls:
        match = _FILTER.fullmatch(call)
        if match is None or match["name"] not in known_filters:
            raise TemplateSyntaxError(f"unknown filter {call!r} in {text!r}")
        filters.append((match["name"], _arguments(match["args"] or "")))
    return Expression(text, value, tuple(filters))


def _arguments(text: str) -> tuple[Any, ...]:
    if not text.strip():
        return ()
    return tuple(literal(arg.strip()) for arg in split_outside_quotes(text, ","))
