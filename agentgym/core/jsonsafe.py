"""``json_safe``: a value as plain JSON types, with one policy for what JSON cannot hold.

- ``None``, ``bool``, ``int`` and ``str`` stay (``StrEnum`` and ``IntEnum`` members too); floats
  stay, the non-finite ones (``nan``, ``inf``) become ``None``;
- mappings become dicts with ``str`` keys; lists and tuples become lists; sets become lists in a
  stable order;
- numpy arrays and scalars and torch tensors (anything with ``tolist()``) become their Python
  values; other ``Enum`` members their value; paths (``os.PathLike``) their text;
- anything else becomes ``"<TypeName: repr>"``, the repr cut to ``REPR_LIMIT`` characters: an
  object is never dropped, and never turned into unbounded text. A container met again inside
  itself becomes ``"<TypeName: circular>"``.

Two uses, one policy: ``json_safe(value)`` builds strict JSON (evaluation records, the env
server's wire format); ``json.dumps(value, default=json_safe)`` converts only what JSON cannot
hold and leaves floats as ``json`` writes them (run files, ``tasks.jsonl``, tool results). A hash
key wants the whole text instead (``agentgym.recipes.eval_cache`` keeps ``default=str``).
"""

from __future__ import annotations

import enum
import json
import math
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["REPR_LIMIT", "json_safe"]

REPR_LIMIT = 200
"""Most characters of an unknown object's repr kept in its ``"<TypeName: repr>"``."""


def json_safe(value: Any) -> Any:
    """``value`` with only JSON types, by the module's policy; ``json.dumps`` takes the result
    as it is (no ``default=``, no ``NaN``)."""
    return _convert(value, frozenset())


def _convert(value: Any, inside: frozenset[int]) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        if id(value) in inside:
            return f"<{type(value).__name__}: circular>"
        return _container(value, inside | {id(value)})
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars, torch tensors
    if callable(tolist) and not isinstance(value, type):
        return _convert(tolist(), inside)
    if isinstance(value, enum.Enum):
        return _convert(value.value, inside)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return _unknown(value)


def _container(value: Any, inside: frozenset[int]) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _convert(v, inside) for k, v in value.items()}
    items = [_convert(v, inside) for v in value]
    if isinstance(value, set | frozenset):
        items.sort(key=lambda item: json.dumps(item, sort_keys=True))
    return items


def _unknown(value: Any) -> str:
    name = type(value).__name__
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not break a log line
        return f"<{name}>"
    if len(text) > REPR_LIMIT:
        text = f"{text[:REPR_LIMIT]}... ({len(text)} characters)"
    return f"<{name}: {text}>"
