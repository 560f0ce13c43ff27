"""Plain data across a process boundary: exact builtin values in, exact builtin values out.

Code-v0's checker never compares an object the candidate made: each value crosses from the
candidate's process as JSON in this tagged form and is rebuilt on the checker's side from
builtin types only. Allowed: ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``,
``bytes``, and ``list``, ``tuple``, ``dict``, ``set``, ``frozenset`` of them, nested up to
``MAX_DEPTH``. The type test is exact: a subclass of ``int`` (or of ``list``, ``str``, ...) is
not plain data, whatever it says about itself.

JSON scalars stand for themselves (``null``, ``true``, ``1``, ``1.5``, ``NaN``, ``"s"``); every
JSON array is tagged by its first item: ``["L", ...]`` list, ``["T", ...]`` tuple, ``["S", ...]``
set, ``["F", ...]`` frozenset, ``["D", k1, v1, ...]`` dict, ``["B", hex]`` bytes,
``["I", hex]`` an int of 62 bits or more, ``["C", re, im]`` complex. JSON objects never occur
in values.

Standard library only: this source also runs inside the sandbox (see ``checker``).
"""

import json

MAX_DEPTH = 100
"""Containers nested deeper than this are not plain data (a recursive list never ends)."""
MAX_MESSAGE = 16 << 20
"""Bytes of one encoded message; a larger answer is refused."""
_SMALL = 1 << 62
_MAKERS = {"L": list, "T": tuple, "S": set, "F": frozenset}
_TAGS = {list: "L", tuple: "T", set: "S", frozenset: "F"}
_SCALARS = (bool, int, float, str)


class NotPlain(TypeError):
    """A value that is not plain data; the message names its type."""


def encode(value: object, depth: int = 0) -> object:
    """The JSON-able tagged form of ``value``; ``NotPlain`` for anything but plain data."""
    kind = type(value)
    if value is None or kind is bool or kind is float or kind is str:
        return value
    if kind is int:
        return value if -_SMALL < value < _SMALL else ["I", format(value, "x")]
    if depth >= MAX_DEPTH:
        raise NotPlain(f"a value nested more than {MAX_DEPTH} levels deep")
    if kind in _TAGS:
        return [_TAGS[kind], *(encode(item, depth + 1) for item in value)]
    if kind is dict:
        flat = ["D"]
        for key, item in value.items():
            flat += (encode(key, depth + 1), encode(item, depth + 1))
        return flat
    if kind is bytes:
        return ["B", value.hex()]
    if kind is complex:
        return ["C", value.real, value.imag]
    raise NotPlain(f"a value of type {_type_name(kind)}")


def decode(data: object, depth: int = 0) -> object:
    """The value ``data`` (parsed JSON in the tagged form) stands for; ``ValueError`` if bad."""
    kind = type(data)
    if data is None or kind in _SCALARS:
        return data
    if kind is not list or not data or type(data[0]) is not str:
        raise ValueError("not plain data")
    if depth >= MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    tag, items = data[0], data[1:]
    maker = _MAKERS.get(tag)
    if maker is not None:
        return maker(decode(item, depth + 1) for item in items)
    if tag == "D" and len(items) % 2 == 0:
        pairs = zip(items[::2], items[1::2], strict=True)
        return {decode(k, depth + 1): decode(v, depth + 1) for k, v in pairs}
    if tag in ("I", "B") and len(items) == 1 and type(items[0]) is str:
        return int(items[0], 16) if tag == "I" else bytes.fromhex(items[0])
    if tag == "C" and len(items) == 2 and all(type(x) in (int, float) for x in items):
        return complex(items[0], items[1])
    raise ValueError(f"not plain data (tag {tag[:20]!r})")


def dumps(message: dict) -> bytes:
    """One message: a JSON object on one line, as bytes."""
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def loads(line: bytes) -> dict:
    """A message back from ``dumps``; ``ValueError`` unless it is a JSON object."""
    message = json.loads(line)
    if type(message) is not dict:
        raise ValueError("a message must be a JSON object")
    return message


def _type_name(kind: type) -> str:
    module = getattr(kind, "__module__", "")
    name = getattr(kind, "__qualname__", "?")
    return name if module in ("builtins", "", None) else f"{module}.{name}"
