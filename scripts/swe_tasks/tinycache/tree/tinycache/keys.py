"""Cache keys for memoized calls.

``hashkey(*args, **kwargs)`` is a tuple equal for equal calls, whatever order the keyword
arguments come in. ``typedkey`` also tells ``1``, ``1.0`` and ``True`` apart, and ``methodkey``
ignores the first argument (``self``).
"""

from __future__ import annotations

from typing import Any

_KWARGS_MARK = ("tinycache.kwargs",)


def hashkey(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
    if not kwargs:
        return args
    return args + _KWARGS_MARK + tuple(sorted(kwargs.items()))


def typedkey(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
    key = hashkey(*args, **kwargs)
    key += tuple(type(value) for value in args)
    key += tuple(type(value) for _, value in sorted(kwargs.items()))
    return key


def methodkey(_self: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    return hashkey(*args, **kwargs)
