"""Tool-call parsers: turn an assistant action into text plus tool calls.

A parser never raises on model output: a malformed call becomes a ``MalformedCall`` that the env
answers with an error observation. Parsers are selected by name (``hermes`` by default)::

    hermes     <tool_call>{"name": "move", "arguments": {"direction": "left"}}</tool_call>
    json       a bare JSON object (or list of them), or one in a ```json fenced block
    pythonic   [move(direction="left"), look()]   (Llama 3.2 / 4 style)

Structured OpenAI ``tool_calls`` on an assistant message dict are always accepted.
``call_format(name)`` is the sentence an env's prompt uses to tell the model how to write a call
the parser reads (the tools' schemas go in ``info["tools"]`` and the chat template, not in it).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import UnknownParserError
from agentgym.core.jsonsafe import json_safe
from agentgym.core.suggest import did_you_mean
from agentgym.core.types import (
    Action,
    Message,
    ToolCall,
    action_text,
    assistant,
    is_turn,
    tool_call,
)

__all__ = [
    "MalformedCall",
    "ParsedAction",
    "ParsedCall",
    "call_format",
    "get_parser",
    "parse_action",
    "parser_names",
    "register_parser",
]


@dataclass(frozen=True)
class ParsedCall:
    """A well-formed tool call (its arguments are a JSON object)."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class MalformedCall:
    """A tool call the model tried to make but that cannot be parsed."""

    id: str
    raw: str
    error: str
    name: str = ""


@dataclass
class ParsedAction:
    """An action split into its free text and its tool calls."""

    content: str
    calls: list[ParsedCall] = field(default_factory=list)
    malformed: list[MalformedCall] = field(default_factory=list)
    order: list[str] = field(default_factory=list, compare=False, repr=False)
    """Ids of calls and malformed calls as they appear in the action (answers follow it)."""

    @property
    def has_calls(self) -> bool:
        return bool(self.calls or self.malformed)

    def message(self) -> Message:
        """The assistant message with structured ``tool_calls`` (for transcripts)."""
        calls: list[ToolCall] = [tool_call(c.id, c.name, c.arguments) for c in self.calls]
        return assistant(self.content, calls or None)


Parser = Callable[[str, str], ParsedAction]
"""``parser(text, id_prefix) -> ParsedAction``; call ids are ``f"{id_prefix}{k}"``."""

_PARSERS: dict[str, Parser] = {}
_CALL_FORMATS: dict[str, str] = {}


def register_parser(name: str, parser: Parser, how_to_call: str = "") -> None:
    """Make ``parser`` selectable as ``tool_parser=name``; ``how_to_call`` is the sentence that
    tells a model how to write a call it reads (``call_format(name)`` answers it)."""
    _PARSERS[name] = parser
    _CALL_FORMATS[name] = how_to_call


def parser_names() -> list[str]:
    return sorted(_PARSERS)


def get_parser(name: str) -> Parser:
    try:
        return _PARSERS[name]
    except KeyError:
        names = did_you_mean(name, parser_names(), kind="parsers")
        raise UnknownParserError(
            f"tool_parser={name!r} is not a registered parser. "
            f"Fix: {names} (or register_parser() your own)"
        ) from None


def call_format(name: str) -> str:
    """How to write a tool call that the parser ``name`` reads, as one sentence for a prompt.

    Envs with tools add it to their instructions, so a model that is not given the tools through
    a chat template still knows the syntax; ``""`` for a parser registered without one. Raises
    ``UnknownParserError`` for a name that is not registered.
    """
    get_parser(name)
    return _CALL_FORMATS.get(name, "")


def _loads(text: str) -> Any:
    """``json.loads`` whose every failure, deep nesting included, is a ``JSONDecodeError``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text[:100], 0) from None


def _call_from_object(obj: Any, call_id: str, raw: str) -> ParsedCall | MalformedCall:
    """A ``{"name": ..., "arguments": {...}}`` object as a call ("parameters" is accepted too)."""
    if not isinstance(obj, dict):
        return MalformedCall(
            call_id, raw, "a tool call must be a JSON object with name and arguments"
        )
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return MalformedCall(call_id, raw, 'the tool call has no "name" string')
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = _loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as e:
            return MalformedCall(call_id, raw, f"arguments are not valid JSON: {e}", name)
    if not isinstance(arguments, dict):
        return MalformedCall(call_id, raw, '"arguments" must be a JSON object', name)
    return ParsedCall(call_id, name, arguments)


def _split(result: ParsedAction, item: ParsedCall | MalformedCall) -> None:
    (result.calls if isinstance(item, ParsedCall) else result.malformed).append(item)  # type: ignore[arg-type]
    result.order.append(item.id)


_HERMES_RE = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)


def parse_hermes(text: str, id_prefix: str = "call_") -> ParsedAction:
    result = ParsedAction(content=_HERMES_RE.sub("", text).strip())
    for k, match in enumerate(_HERMES_RE.finditer(text)):
        body, closed = match.group(1).strip(), bool(match.group(2))
        call_id = f"{id_prefix}{k}"
        if not closed:
            _split(
                result,
                MalformedCall(
                    call_id, body, "the <tool_call> block is not closed with </tool_call>"
                ),
            )
            continue
        try:
            obj = _loads(body)
        except json.JSONDecodeError as e:
            _split(result, MalformedCall(call_id, body, f"the tool call is not valid JSON: {e}"))
            continue
        _split(result, _call_from_object(obj, call_id, body))
    return result


_FENCED_JSON_RE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def parse_json(text: str, id_prefix: str = "call_") -> ParsedAction:
    fenced = _FENCED_JSON_RE.findall(text)
    body = (fenced[-1] if fenced else text).strip()
    if not body.startswith(("{", "[")):
        return ParsedAction(content=text.strip())
    try:
        obj = _loads(body)
    except json.JSONDecodeError as e:
        return ParsedAction(
            "", malformed=[MalformedCall(f"{id_prefix}0", body, f"not valid JSON: {e}")]
        )
    result = ParsedAction(content=text.replace(body, "").strip() if fenced else "")
    for k, item in enumerate(obj if isinstance(obj, list) else [obj]):
        _split(result, _call_from_object(item, f"{id_prefix}{k}", json.dumps(item)))
    return result


def _literal(node: ast.expr) -> Any:
    return ast.literal_eval(node)


def parse_pythonic(text: str, id_prefix: str = "call_") -> ParsedAction:
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return ParsedAction(content=stripped)
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as e:
        return ParsedAction(
            "", malformed=[MalformedCall(f"{id_prefix}0", stripped, f"not a call list: {e.msg}")]
        )
    except (MemoryError, RecursionError):  # CPython's parser on very deep nesting
        return ParsedAction(
            "", malformed=[MalformedCall(f"{id_prefix}0", stripped[:200], "nested too deeply")]
        )
    if not isinstance(tree.body, ast.List):
        return ParsedAction(content=stripped)
    result = ParsedAction(content="")
    for k, node in enumerate(tree.body.elts):
        call_id, raw = f"{id_prefix}{k}", ast.unparse(node)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or node.args:
            _split(result, MalformedCall(call_id, raw, "write each call as name(key=value, ...)"))
            continue
        try:
            arguments = {kw.arg: _literal(kw.value) for kw in node.keywords if kw.arg}
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
            _split(
                result,
                MalformedCall(call_id, raw, f"arguments must be literals: {e}", node.func.id),
            )
            continue
        _split(result, ParsedCall(call_id, node.func.id, arguments))
    return result


_CALL_OBJECT = '{"name": <tool name>, "arguments": <its arguments as a JSON object>}'
register_parser(
    "hermes",
    parse_hermes,
    f"To call a tool, write <tool_call>{_CALL_OBJECT}</tool_call>, one such block per call.",
)
register_parser(
    "json",
    parse_json,
    f"To call a tool, answer with {_CALL_OBJECT} alone or in a ```json block (a JSON list of "
    "them for several calls).",
)
register_parser(
    "pythonic",
    parse_pythonic,
    'To call tools, answer with a Python list of calls alone, e.g. [tool_a(key="value"), '
    "tool_b()]: arguments by keyword, as literals.",
)


def _parse_structured(message: Message, id_prefix: str) -> ParsedAction:
    result = ParsedAction(content=action_text(message))
    calls: Any = message.get("tool_calls")
    if not isinstance(calls, list):
        error = "tool_calls must be a list"
        _split(result, MalformedCall(f"{id_prefix}0", repr(calls)[:200], error))
        return result
    for k, call in enumerate(calls):
        given_id = call.get("id") if isinstance(call, dict) else None
        call_id = given_id if isinstance(given_id, str) and given_id else f"{id_prefix}{k}"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            _split(result, MalformedCall(call_id, repr(call)[:200], "tool call has no function"))
            continue
        raw = json.dumps(function, default=json_safe, skipkeys=True)[:10_000]
        _split(result, _call_from_object(function, call_id, raw))
    return result


def parse_action(
    action: Action | Any, parser: str | Parser = "hermes", id_prefix: str = "call_"
) -> ParsedAction:
    """Split an action (text or assistant message dict) into text and tool calls.

    Never raises on model output: anything that is not a string or an assistant message dict
    parses as one malformed call.
    """
    parse = get_parser(parser) if isinstance(parser, str) else parser
    if isinstance(action, dict) and is_turn(action) and action.get("tool_calls"):
        return _parse_structured(action, id_prefix)  # type: ignore[arg-type]
    if is_turn(action):
        return parse(action_text(action), id_prefix)
    return ParsedAction(
        "",
        malformed=[
            MalformedCall(
                f"{id_prefix}0",
                repr(action)[:200],
                "an action must be text or an assistant message",
            )
        ],
    )
