"""Frozen config dataclasses that check themselves at construction.

A subclass declares each field with a type hint and a docstring right under it (the field's
``--help`` text), and its numeric rules in ``_bounds``. Construction checks every field's type
(an int where a float is asked becomes a float, a string an enum member, a list a tuple) and
bound, and raises ``ConfigError`` naming the value, the rule it breaks and the fix::

    @dataclass(frozen=True, kw_only=True)
    class Options(Config):
        warmup_steps: int = 0
        \"\"\"Optimizer steps of linear learning-rate warm-up.\"\"\"

        _bounds: ClassVar[dict[str, str]] = {"warmup_steps": ">= 0"}

    Options.from_dict({"warmup_step": 3})  # ConfigError: ... Did you mean 'warmup_steps'?

The algorithm configs (``agentgym.trainers.config``) and the run description of ``agentgym
train`` (``agentgym.recipes.config``) are built on it. It needs no torch, so that ``--help``
text can be read from the docstrings where only the core is installed.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
import types
import typing
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, ClassVar, Literal, Self

from agentgym.core.errors import ConfigError
from agentgym.core.suggest import did_you_mean

__all__ = ["Config", "check_bounds", "coerce", "did_you_mean", "field_docs", "require"]


def require(ok: bool, config: object, name: str, rule: str, fix: str) -> None:
    """Raise ``ConfigError`` for ``config``'s field ``name`` unless ``ok``."""
    if not ok:
        value = getattr(config, name)
        raise ConfigError(name, value.value if isinstance(value, StrEnum) else value, rule, fix)


BOUNDS: dict[str, Callable[[Any], bool]] = {
    "> 0": lambda v: v > 0,
    ">= 0": lambda v: v >= 0,
    ">= 1": lambda v: v >= 1,
    "> 1": lambda v: v > 1,
    "in [0, 1]": lambda v: 0 <= v <= 1,
    "in (0, 1)": lambda v: 0 < v < 1,
    "in [0, 1)": lambda v: 0 <= v < 1,
}
"""The rules ``_bounds`` may name."""


def check_bounds(config: object) -> None:
    """Every class's ``_bounds`` (``{field: bound}``); None (off) always passes, and each
    element of a tuple must pass."""
    defaults = {f.name: f.default for f in dataclasses.fields(config)}  # type: ignore[arg-type]
    for klass in type(config).__mro__:
        for name, bound in vars(klass).get("_bounds", {}).items():
            value, default = getattr(config, name), defaults[name]
            example = "None to turn it off" if default is None else f"e.g. {default!r}"
            fix = f"use a value {bound}, or {example}"
            each = value if isinstance(value, tuple) else (value,)
            ok = value is None or all(BOUNDS[bound](v) for v in each)
            rule = f"must be {bound}" + (" (each value)" if isinstance(value, tuple) else "")
            require(ok, config, name, rule, fix)


_SCALARS: dict[type, Callable[[object], bool]] = {  # bool is an int to Python, not here
    bool: lambda v: isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    str: lambda v: isinstance(v, str),
}


def coerce(name: str, value: object, hint: Any) -> object:
    """``value`` checked against the field type ``hint``: int → float, str → enum member or
    literal, list → tuple, mapping → read-only mapping; ``ConfigError`` when it does not fit."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    optional = origin in (typing.Union, types.UnionType) and type(None) in args
    if optional:
        if value is None:
            return None
        (hint,) = [a for a in args if a is not type(None)]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal or (isinstance(hint, type) and issubclass(hint, StrEnum)):
        return _choice(name, value, hint)
    if origin is tuple:
        return _tuple(name, value, args)
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(name, value, "is not a mapping", f"pass a table, e.g. {name} = {{}}")
        return types.MappingProxyType(dict(value))  # frozen like the config that holds it
    check = _SCALARS.get(hint)
    if check is None:
        if isinstance(hint, type) and not isinstance(value, hint):
            raise ConfigError(name, value, f"is not a {hint.__name__}", f"pass a {hint.__name__}")
        return value
    if not check(value):
        kind = hint.__name__
        fix = f"pass a {kind} value" + (" or None (null in JSON and --set)" if optional else "")
        raise ConfigError(name, value, f"must be of type {kind}", fix)
    return float(value) if hint is float else value  # type: ignore[arg-type]


def _choice(name: str, value: object, hint: Any) -> object:
    if typing.get_origin(hint) is Literal:
        choices = [str(c) for c in typing.get_args(hint)]
        if value in typing.get_args(hint):
            return value
    else:
        if isinstance(value, str) and value in hint._value2member_map_:
            return hint(value)
        choices = [m.value for m in hint]
    raise ConfigError(name, value, "is not a valid choice", did_you_mean(str(value), choices))


def _tuple(name: str, value: object, args: tuple[Any, ...]) -> tuple[object, ...]:
    if len(args) == 2 and args[1] is Ellipsis:  # tuple[T, ...]: any length
        if not isinstance(value, list | tuple):
            raise ConfigError(name, value, "is not a list", "in JSON and TOML a list, e.g. []")
        args = (args[0],) * len(value)
    if not isinstance(value, list | tuple) or len(value) != len(args):
        fix = "in JSON and TOML a list, e.g. [0.9, 0.999]"
        raise ConfigError(name, value, f"must be {len(args)} values", fix)
    try:
        return tuple(coerce(name, v, hint) for v, hint in zip(value, args, strict=True))
    except ConfigError as error:  # the whole value, so that the message shows which element
        raise ConfigError(name, value, error.rule, error.fix) from None


def _own_docstrings(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string right after ``name: type = default``) of ``cls`` itself."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # defined where no source is kept, e.g. a REPL
        return {}
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def field_docs(cls: type) -> dict[str, str]:
    """Each dataclass field's docstring, here or in the nearest base class ("" if none)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_own_docstrings(klass))
    return {f.name: docs.get(f.name, "") for f in dataclasses.fields(cls)}  # type: ignore[arg-type]


class Config:
    """Base of frozen config dataclasses: subclasses are ``@dataclass(frozen=True,
    kw_only=True)``; ``__post_init__`` coerces and checks every field against its type and
    ``_bounds``."""

    _bounds: ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        hints = type(self)._field_types()
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            object.__setattr__(self, f.name, coerce(f.name, getattr(self, f.name), hints[f.name]))
        check_bounds(self)

    @classmethod
    def _field_types(cls) -> dict[str, Any]:
        """The fields' type hints, evaluated (a subclass may supply names imported late)."""
        return typing.get_type_hints(cls)

    @classmethod
    def _unknown_key_rule(cls) -> str:
        return f"is not a field of {cls.__name__}"

    @classmethod
    def field_help(cls) -> dict[str, str]:
        """Each field's ``--help`` text: its docstring here or in the nearest base class."""
        return field_docs(cls)

    @classmethod
    def check_keys(cls, data: Mapping[str, Any]) -> None:
        """``ConfigError`` with the closest field name for a key that is not a field."""
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        for key, value in data.items():
            if key not in names:
                fix = did_you_mean(key, names, kind="names")
                raise ConfigError(key, value, cls._unknown_key_rule(), fix)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """A config from a mapping (a config file's table); unknown keys raise ``ConfigError``."""
        cls.check_keys(data)
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (enums as strings, mappings as dicts, nested configs as dicts);
        ``from_dict`` reads it back."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def _plain(value: object) -> object:
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, Config):
        return value.to_dict()
    if isinstance(value, Mapping):
        return dict(value)
    return value
