"""Tools an env declares: a typed, docstring'd function becomes a JSON-schema'd ``Tool``.

Tools are declared, never discovered by reflection over an object: an env lists its tools, and
``info["tools"]`` on reset carries their OpenAI-style schemas for the chat template.
"""

from __future__ import annotations

import copy
import enum
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from agentgym.core.errors import ToolDefinitionError
from agentgym.core.jsonsafe import json_safe

__all__ = ["InvalidArguments", "Tool", "ToolCallFailed", "tool"]

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ARG_LINE_RE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_RE = re.compile(r"^\s*:param\s+(?:\w+\s+)?(\w+)\s*:\s*(.*)$")
_SPHINX_FIELD_RE = re.compile(r"^\s*:\w+[^:]*:")
_ARG_SECTIONS = ("Args", "Arguments", "Parameters")
_SECTION_RE = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)\s*:\s*$"
)


class ToolCallFailed(Exception):
    """Raise inside a tool to report a failure the model caused (shown to it as the result).

    Deliberately not an ``agentgym.error.Error``: it is data for the model, not a bug.
    """


class InvalidArguments(ToolCallFailed):
    """``Tool.call``'s answer to arguments that break the tool's schema (a format error)."""


def _json_type(annotation: Any, where: str) -> dict[str, Any]:
    """JSON schema of a Python annotation."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation in simple:
        return {"type": simple[annotation]}
    if annotation in (dict, Mapping) or origin in (dict, Mapping):
        return {"type": "object"}
    if annotation in (list, tuple) or origin in (list, tuple, typing.Sequence):
        item = args[0] if args else None
        return {"type": "array", **({"items": _json_type(item, where)} if item else {})}
    if origin is typing.Literal:
        return _typed_enum(list(args))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _typed_enum([m.value for m in annotation])
    if origin in (typing.Union, types.UnionType):
        options = [_json_type(a, where) for a in args if a is not type(None)]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        return _nullable(schema) if type(None) in args else schema
    if annotation is Any:
        return {}
    raise ToolDefinitionError(
        f"{where}: cannot express type {annotation!r} as JSON schema. "
        "Fix: use str, int, float, bool, list[...], dict, Literal[...] or an Enum."
    )


def _typed_enum(values: list[Any]) -> dict[str, Any]:
    """An enum schema that also names its JSON type when all values share one: chat templates
    and OpenAI-style validators expect ``"type"`` next to ``"enum"``."""
    kinds = {type(v) for v in values}
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if len(kinds) == 1 and (kind := kinds.pop()) in names:
        return {"type": names[kind], "enum": values}
    return {"enum": values}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also accepts ``null`` (JSON Schema has no OpenAPI-style "nullable")."""
    if "enum" in schema:
        schema = {**schema, "enum": [*schema["enum"], None]}
    if isinstance(schema.get("type"), str):
        return {**schema, "type": [schema["type"], "null"]}
    if "enum" in schema:
        return schema
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return schema  # {} (Any) accepts null already


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Summary and per-argument descriptions of a Google- or Sphinx-style docstring."""
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        indent = len(line) - len(line.lstrip())
        sphinx = _SPHINX_RE.match(line)
        header = _SECTION_RE.match(line)
        arg = _ARG_LINE_RE.match(line)
        if sphinx:
            current, section = sphinx.group(1), "Args"
            params[current] = sphinx.group(2).strip()
        elif header:
            section, current, arg_indent = header.group(1), None, None
        elif _SPHINX_FIELD_RE.match(line):
            section, current = "Fields", None
        elif section is None:
            summary.append(line)
        elif section in _ARG_SECTIONS and arg and (arg_indent is None or indent <= arg_indent):
            current, arg_indent = arg.group(1).lstrip("*"), indent
            params[current] = arg.group(2).strip()
        elif section in _ARG_SECTIONS and current and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
    first_paragraph = "\n".join(summary).strip().split("\n\n")[0]
    return " ".join(part.strip() for part in first_paragraph.splitlines()), params


def _schema_of(fn: Callable[..., Any], name: str) -> tuple[str, dict[str, Any]]:
    doc = inspect.getdoc(fn)
    if not doc:
        raise ToolDefinitionError(
            f"tool {name!r} has no docstring. Fix: add one; its first paragraph is the tool's "
            "description and its Args section describes each parameter."
        )
    description, arg_docs = _parse_docstring(doc)
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {name!r}: *{param.name} cannot be described by a schema. "
                "Fix: name every parameter."
            )
        if param.name not in hints:
            raise ToolDefinitionError(
                f"tool {name!r}: parameter {param.name!r} has no type hint. Fix: annotate it."
            )
        prop = _json_type(hints[param.name], f"tool {name!r}, parameter {param.name!r}")
        if param.name in arg_docs:
            prop["description"] = arg_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif isinstance(param.default, enum.Enum):
            prop["default"] = param.default.value
        elif param.default is None or isinstance(param.default, str | int | float | bool):
            prop["default"] = param.default
        properties[param.name] = prop
    parameters = {"type": "object", "properties": properties, "required": required}
    parameters["additionalProperties"] = False
    return description, parameters


def _enum_members(fn: Callable[..., Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with the values of ``Enum``-typed parameters turned into members."""
    hints = typing.get_type_hints(fn)
    converted = dict(arguments)
    for key, value in arguments.items():
        hint = hints.get(key)
        members = [t for t in (hint, *typing.get_args(hint)) if _is_enum(t)]
        if members and value is not None:
            converted[key] = members[0](value)
    return converted


def _is_enum(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


def clip(text: str, limit: int = 500) -> str:
    """``text`` cut to ``limit`` characters: model-written text echoed in an error stays small."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Tool:
    """A function the model may call.

    Build one with ``Tool.from_function(fn)`` or the ``@tool`` decorator; ``schema()`` is the
    OpenAI function-tool dict for ``info["tools"]``; ``await tool.call(arguments)`` validates the
    arguments against the schema and runs the function (sync or async).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any] = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ToolDefinitionError(
                f"tool name {self.name!r} is not allowed. Fix: use 1-64 letters, digits, _ or -."
            )
        jsonschema.Draft202012Validator.check_schema(self.parameters)

    @classmethod
    def from_function(
        cls, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> Tool:
        tool_name = name or getattr(fn, "__name__", "")
        summary, parameters = _schema_of(fn, tool_name)
        return cls(tool_name, description or summary, parameters, fn)

    def schema(self) -> dict[str, Any]:
        """A fresh copy of the OpenAI function-tool schema."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }

    @functools.cached_property
    def _validator(self) -> jsonschema.Draft202012Validator:
        return jsonschema.Draft202012Validator(self.parameters)

    def validation_error(self, arguments: Mapping[str, Any]) -> str | None:
        """Why ``arguments`` do not fit the schema, or ``None`` when they do."""
        errors = sorted(self._validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
        if not errors:
            return None
        return "; ".join(clip(e.message) for e in errors[:3])

    async def call(self, arguments: Mapping[str, Any]) -> str:
        """Run the tool; returns its result as text.

        Raises ``ToolCallFailed`` for arguments that break the schema; the tool itself raises
        ``ToolCallFailed`` for failures the model caused.
        """
        problem = self.validation_error(arguments)
        if problem is not None:
            raise InvalidArguments(f"invalid arguments for {self.name}: {problem}")
        result = self.fn(**_enum_members(self.fn, arguments))
        if inspect.isawaitable(result):
            result = await typing.cast(Awaitable[Any], result)
        if isinstance(result, str):
            return result
        return json.dumps(result, ensure_ascii=False, default=json_safe)


def tool(fn: Callable[..., Any]) -> Tool:
    """Decorator: ``@tool`` turns a typed, docstring'd function into a ``Tool``."""
    return Tool.from_function(fn)
