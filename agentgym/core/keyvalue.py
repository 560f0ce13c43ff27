"""The one ``KEY=VALUE`` grammar of every agentgym command.

::

    parse_pairs(["lr=1e-3", "name=x"], "--set")           # {"lr": 0.001, "name": "x"}
    parse_kwargs(["size=5", '{"slippery": true}'])        # {"size": 5, "slippery": True}
    parse_pairs(["X-Token=123"], "--header", text=True)   # {"X-Token": "123"}

A value is read as JSON when it parses (``5``, ``true``, ``null``, ``[1, 2]``,
``{"a": 1}``), else it is the text itself (``x``, ``a.jsonl``). Env arguments
(``--env-kwargs`` of ``agentgym train``, ``eval``, ``serve-env`` and ``play``) take items that
are each ``KEY=VALUE`` or a JSON object, the flag repeated or given several items, a later key
over an earlier one. Text mode (HTTP headers, environment variables) keeps every value as text
and takes any key; as such values are often secrets, its errors never show the item
(``NOT_SHOWN`` stands in for it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from agentgym.core.deprecation import warn_deprecated
from agentgym.core.errors import ConfigError

__all__ = ["NOT_SHOWN", "parse_kwargs", "parse_pairs", "parse_value"]


class _NotShown:
    """Stands in an error message for a value that may be a secret (a key, a header)."""

    def __repr__(self) -> str:
        return "<not shown>"


NOT_SHOWN: Final = _NotShown()


def parse_value(text: str) -> Any:
    """``text`` read as JSON when it parses, else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _pair(item: str, flag: str, text: bool) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    good_key = (bool(key) and not any(c.isspace() for c in key)) if text else key.isidentifier()
    if not sep or not good_key:
        rule = "is not KEY=VALUE" + ("" if text else " (KEY a Python name)")
        example = "NAME=value" if text else "size=5"
        raise ConfigError(flag, NOT_SHOWN if text else item, rule, f"write e.g. {flag} {example}")
    return key, value


def parse_pairs(items: Iterable[str], flag: str, *, text: bool = False) -> dict[str, Any]:
    """``KEY=VALUE`` items as a mapping, a later key over an earlier one; a value is JSON when it
    parses, else text (``text=True``: always text, and a key may be any word). A malformed item
    is a ``ConfigError`` naming ``flag``."""
    pairs: dict[str, Any] = {}
    for item in items:
        key, value = _pair(item, flag, text)
        pairs[key] = value if text else parse_value(value)
    return pairs


def _comma_pairs(item: str) -> list[str] | None:
    """The old ``a=1,b=2`` form's pairs, when every comma-separated part is ``KEY=VALUE``."""
    if "," not in item or item.lstrip().startswith("{"):
        return None
    parts = item.split(",")
    if all(p.partition("=")[1] and p.partition("=")[0].isidentifier() for p in parts):
        return parts
    return None


def _object(item: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(item)
    except json.JSONDecodeError as e:
        raise ConfigError(flag, item, f"is not a JSON object ({e})", "write size=5") from None
    if not isinstance(value, dict):
        raise ConfigError(flag, item, "is not a JSON object", "write size=5 or '{\"size\": 5}'")
    return value


def parse_kwargs(items: str | Iterable[str] | None, flag: str = "--env-kwargs") -> dict[str, Any]:
    """Env arguments (and the other mapping flags) from their items: each a JSON object or
    ``KEY=VALUE``, a later key over an earlier one. One string is one item. The old
    comma-separated form (``a=1,b=2``) is read with a deprecation warning."""
    if items is None:
        return {}
    kwargs: dict[str, Any] = {}
    for item in [items] if isinstance(items, str) else items:
        if not item.strip():
            continue
        if item.lstrip().startswith("{"):
            kwargs.update(_object(item, flag))
            continue
        parts = _comma_pairs(item)
        if parts is not None:
            warn_deprecated(f"{flag} {item} (comma-separated)", f"{flag} {' '.join(parts)}")
        kwargs.update(parse_pairs(parts or [item], flag))
    return kwargs
