"""Tool-call parsers: every shape a model writes, and never an exception on model output."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgym.core import (
    MalformedCall,
    ParsedAction,
    ParsedCall,
    assistant,
    call_format,
    get_parser,
    parse_action,
    parser_names,
    register_parser,
    tool_call,
)
from agentgym.error import UnknownParserError


def test_builtin_parsers_are_registered() -> None:
    assert {"hermes", "json", "pythonic"} <= set(parser_names())


# --- hermes ----------------------------------------------------------------------------------


def test_hermes_multiple_calls_and_text() -> None:
    text = (
        "I will move twice.\n"
        '<tool_call>{"name": "move", "arguments": {"direction": "left"}}</tool_call>\n'
        '<tool_call>{"name": "move", "arguments": {"direction": "up"}}</tool_call>'
    )
    parsed = parse_action(text, "hermes", id_prefix="t1_")
    assert parsed.content == "I will move twice."
    assert parsed.calls == [
        ParsedCall("t1_0", "move", {"direction": "left"}),
        ParsedCall("t1_1", "move", {"direction": "up"}),
    ]
    assert parsed.malformed == []
    assert parsed.has_calls


def test_hermes_plain_text_has_no_calls() -> None:
    parsed = parse_action("  just thinking  ")
    assert parsed == ParsedAction("just thinking")
    assert not parsed.has_calls


def test_hermes_arguments_as_json_string_and_parameters_alias() -> None:
    text = (
        '<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>'
        '<tool_call>{"name": "b", "parameters": {"y": 2}}</tool_call>'
        '<tool_call>{"name": "c"}</tool_call>'
        '<tool_call>{"name": "d", "arguments": ""}</tool_call>'
    )
    assert parse_action(text).calls == [
        ParsedCall("call_0", "a", {"x": 1}),
        ParsedCall("call_1", "b", {"y": 2}),
        ParsedCall("call_2", "c", {}),
        ParsedCall("call_3", "d", {}),
    ]


@pytest.mark.parametrize(
    ("body", "error", "name"),
    [
        ("{not json", "the tool call is not valid JSON", ""),
        ('["move"]', "must be a JSON object", ""),
        ('{"arguments": {}}', 'no "name" string', ""),
        ('{"name": "move", "arguments": "not an object"}', "arguments are not valid JSON", "move"),
        ('{"name": "move", "arguments": [1]}', '"arguments" must be a JSON object', "move"),
        ("[" * 100_000, "nested too deeply", ""),
    ],
)
def test_hermes_malformed_calls(body: str, error: str, name: str) -> None:
    parsed = parse_action(f"<tool_call>{body}</tool_call>")
    assert parsed.calls == []
    [malformed] = parsed.malformed
    assert error in malformed.error
    assert (malformed.id, malformed.name) == ("call_0", name)


def test_hermes_unclosed_call_is_malformed_and_good_calls_before_it_survive() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call> then <tool_call>{"name": "b"'
    parsed = parse_action(text)
    assert parsed.calls == [ParsedCall("call_0", "a", {})]
    assert parsed.malformed == [
        MalformedCall(
            "call_1", '{"name": "b"', "the <tool_call> block is not closed with </tool_call>"
        )
    ]
    assert parsed.content == "then"


# --- json --------------------------------------------------------------------------------------


def test_json_bare_object_list_and_fenced_block() -> None:
    assert parse_action('{"name": "a", "arguments": {"x": 1}}', "json").calls == [
        ParsedCall("call_0", "a", {"x": 1})
    ]
    assert [c.name for c in parse_action('[{"name": "a"}, {"name": "b"}]', "json").calls] == [
        "a",
        "b",
    ]
    fenced = parse_action('Plan:\n```json\n{"name": "a", "arguments": {}}\n```', "json")
    assert fenced.calls == [ParsedCall("call_0", "a", {})]
    assert fenced.content.startswith("Plan:")


def test_json_prose_is_content_and_broken_json_is_malformed() -> None:
    assert parse_action("hello there", "json") == ParsedAction("hello there")
    broken = parse_action('{"name": "a",', "json")
    assert broken.calls == []
    assert "not valid JSON" in broken.malformed[0].error


# --- pythonic ----------------------------------------------------------------------------------


def test_pythonic_calls() -> None:
    parsed = parse_action(
        '[move(direction="left"), look(), jump(height=2, tags=["a"])]', "pythonic"
    )
    assert parsed.calls == [
        ParsedCall("call_0", "move", {"direction": "left"}),
        ParsedCall("call_1", "look", {}),
        ParsedCall("call_2", "jump", {"height": 2, "tags": ["a"]}),
    ]
    assert parsed.content == ""


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[move(left)]", "name(key=value"),
        ("[obj.move(d=1)]", "name(key=value"),
        ("[move(d=x)]", "arguments must be literals"),
        ("[move(d=1]", "not a call list"),
        ("[f(a=" + "-" * 100_000 + "1)]", "nested too deeply"),
    ],
)
def test_pythonic_malformed(text: str, error: str) -> None:
    parsed = parse_action(text, "pythonic")
    assert parsed.calls == []
    assert error in parsed.malformed[0].error


def test_pythonic_prose_is_content() -> None:
    assert parse_action("I think [this] is fine", "pythonic") == ParsedAction(
        "I think [this] is fine"
    )
    assert parse_action("[1, 2]", "pythonic").malformed[0].error.startswith("write each call")


# --- structured and non-string actions ---------------------------------------------------------


def test_structured_tool_calls_keep_their_ids() -> None:
    message = assistant(
        "ok", [tool_call("abc", "move", {"direction": "up"}), tool_call("", "look", {})]
    )
    parsed = parse_action(message, "pythonic")  # the text parser is irrelevant here
    assert parsed.content == "ok"
    assert parsed.calls == [
        ParsedCall("abc", "move", {"direction": "up"}),
        ParsedCall("call_1", "look", {}),
    ]


@pytest.mark.parametrize(
    ("calls", "error"),
    [
        ([{"id": "c0", "type": "function"}], "tool call has no function"),
        (
            [{"id": "c0", "function": {"name": "f", "arguments": "{bad"}}],
            "arguments are not valid JSON",
        ),
        ([None], "tool call has no function"),
        ("not a list", "tool_calls must be a list"),
        (7, "tool_calls must be a list"),
    ],
)
def test_malformed_structured_calls(calls: Any, error: str) -> None:
    parsed = parse_action({"role": "assistant", "content": None, "tool_calls": calls})
    assert parsed.calls == []
    assert error in parsed.malformed[0].error


def test_assistant_dict_without_calls_parses_its_content_as_text() -> None:
    parsed = parse_action(assistant('<tool_call>{"name": "a"}</tool_call>'))
    assert parsed.calls == [ParsedCall("call_0", "a", {})]


@pytest.mark.parametrize("action", [None, 5, ["text"], {"role": "user", "content": "hi"}, b"bytes"])
def test_non_actions_are_one_malformed_call(action: Any) -> None:
    parsed = parse_action(action)
    assert parsed.calls == []
    assert [m.error for m in parsed.malformed] == ["an action must be text or an assistant message"]


def test_parsed_action_message_has_structured_calls() -> None:
    parsed = parse_action('hi <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>')
    assert parsed.message() == assistant("hi", [tool_call("call_0", "a", {"x": 1})])


# --- selection by name -------------------------------------------------------------------------


def test_unknown_parser_suggests_the_closest_name() -> None:
    with pytest.raises(UnknownParserError, match="Did you mean 'hermes'"):
        get_parser("hermez")
    with pytest.raises(UnknownParserError, match="Did you mean 'hermes'"):
        parse_action("x", "hermez")


def test_register_parser_makes_a_custom_parser_selectable() -> None:
    def shout(text: str, id_prefix: str) -> ParsedAction:
        return ParsedAction(text.upper())

    register_parser("test-shout", shout)
    assert parse_action("hi", "test-shout").content == "HI"
    assert parse_action("hi", shout).content == "HI"


# --- how to write a call, for prompts ------------------------------------------------------------


def _filled(template: str) -> str:
    """A call written as the sentence's template says, to ``move`` with ``direction=left``."""
    template = template.replace("<tool name>", '"move"')
    return template.replace("<its arguments as a JSON object>", '{"direction": "left"}')


@pytest.mark.parametrize(
    ("name", "template"),
    [("hermes", r"<tool_call>.*</tool_call>"), ("json", r'\{"name": <tool name>.*?object>\}')],
)
def test_call_format_is_a_call_its_parser_reads(name: str, template: str) -> None:
    sentence = call_format(name)
    written = _filled(re.search(template, sentence).group())  # type: ignore[union-attr]
    assert parse_action(written, name).calls == [
        ParsedCall("call_0", "move", {"direction": "left"})
    ]


def test_call_format_of_pythonic_is_its_example() -> None:
    example = re.search(r"\[.*\]", call_format("pythonic")).group()  # type: ignore[union-attr]
    parsed = parse_action(example, "pythonic")
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("tool_a", {"key": "value"}),
        ("tool_b", {}),
    ]


def test_call_format_of_custom_and_unknown_parsers() -> None:
    register_parser("test-quiet", lambda text, prefix: ParsedAction(text))
    register_parser("test-said", lambda text, prefix: ParsedAction(text), "Write CALL name.")
    assert call_format("test-quiet") == ""
    assert call_format("test-said") == "Write CALL name."
    with pytest.raises(UnknownParserError, match="Did you mean 'hermes'"):
        call_format("hermez")


# --- never raise on model output ---------------------------------------------------------------

TAGGED_TEXT = st.lists(
    st.one_of(
        st.text(),
        st.sampled_from(
            ["<tool_call>", "</tool_call>", "{", "}", "[", "]", '"name"', ":", "```json\n", "```"]
        ),
    )
).map("".join)
JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@pytest.mark.parametrize("parser", ["hermes", "json", "pythonic"])
@given(text=TAGGED_TEXT)
def test_parsers_never_raise_on_text(parser: str, text: str) -> None:
    parsed = parse_action(text, parser)
    assert isinstance(parsed, ParsedAction)
    assert all(isinstance(c.arguments, dict) for c in parsed.calls)


@given(
    action=st.dictionaries(st.sampled_from(["role", "content", "tool_calls", "name"]), JSON_LIKE)
)
def test_parse_action_never_raises_on_dicts(action: dict[str, Any]) -> None:
    assert isinstance(parse_action(action), ParsedAction)


@given(
    calls=st.lists(
        st.dictionaries(
            st.sampled_from(["id", "type", "function"]),
            JSON_LIKE | st.dictionaries(st.sampled_from(["name", "arguments", 1]), JSON_LIKE),
        )
    )
)
def test_parse_action_never_raises_on_structured_calls(calls: list[Any]) -> None:
    parsed = parse_action({"role": "assistant", "content": None, "tool_calls": calls})
    assert len(parsed.calls) + len(parsed.malformed) == len(calls)
