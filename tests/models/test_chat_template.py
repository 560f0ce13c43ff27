"""The tiny policy's chat template: what it renders, and that it is prefix-stable in tokens."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym.core.parsing import parse_hermes
from agentgym.core.types import assistant, system, tool_call, tool_message, user
from agentgym.inference.chat import parse_assistant, render_ids, render_text
from agentgym.models import load_tokenizer

MOVE = {
    "type": "function",
    "function": {
        "name": "move",
        "description": "Move one square.",
        "parameters": {"type": "object", "properties": {"direction": {"enum": ["left", "right"]}}},
    },
}


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def test_renders_every_role_and_the_generation_prompt(tok):
    call = tool_call("c0", "move", {"direction": "left"})
    messages = [
        system("Play."),
        user("P F\nF G"),
        assistant(None, [call]),
        tool_message("You moved left.", "c0", "move"),
        assistant("Done."),
    ]
    assert render_text(tok, messages, tools=[MOVE], add_generation_prompt=True) == (
        "<|im_start|>system\nPlay.\n\n# Tools\n<tools>\n" + json.dumps(MOVE) + "\n</tools>\n"
        'To call a tool, reply with <tool_call>{"name": <tool name>, "arguments": '
        "<arguments object>}</tool_call><|im_end|>\n"
        "<|im_start|>user\nP F\nF G<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>{"name": "move", "arguments": {"direction": "left"}}'
        "</tool_call><|im_end|>\n"
        "<|im_start|>tool\nYou moved left.<|im_end|>\n"
        "<|im_start|>assistant\nDone.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_tools_without_system_message_get_their_own_system_block(tok):
    text = render_text(tok, [user("hi")], tools=[MOVE])
    assert text.startswith("<|im_start|>system\n# Tools\n<tools>\n")
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n")
    assert render_text(tok, [user("hi")]) == "<|im_start|>user\nhi<|im_end|>\n"


def test_rendered_tool_calls_parse_back_to_the_same_calls(tok):
    calls = [tool_call("a", "move", {"direction": "left"}), tool_call("b", "look", {})]
    dict_args = {"id": "c", "type": "function", "function": {"name": "move", "arguments": {"x": 1}}}
    text = render_text(tok, [assistant("Let me move.", [*calls, dict_args])])
    body = text.removeprefix("<|im_start|>assistant\n").removesuffix("<|im_end|>\n")
    parsed = parse_hermes(body)
    assert parsed.content == "Let me move."
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("move", {"direction": "left"}),
        ("look", {}),
        ("move", {"x": 1}),
    ]
    message = parse_assistant(body)
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [
        {"direction": "left"},
        {},
        {"x": 1},
    ]


# Contents that stress tokenization at block boundaries: leading/trailing newlines and spaces,
# digits, JSON, markers and arbitrary unicode.
_content = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=' \n\t\r{}":,0123456789abcXYZé🙂<>|_', max_size=30),
    st.sampled_from(
        ["", "\n", " ", "\n\nleft", " left\n", "```down```", "<|im_end|>", "<tool_call>"]
    ),
)
_call = st.builds(lambda d: tool_call("c", "move", {"direction": d}), st.text(max_size=8))
_message = st.one_of(
    st.builds(user, _content),
    st.builds(system, _content),
    st.builds(lambda c, n: tool_message(c, "c", "move"), _content, st.none()),
    st.builds(assistant, _content, st.none() | st.lists(_call, min_size=1, max_size=2)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.builds(system, _content) | st.builds(user, _content),
    rest=st.lists(_message, max_size=6),
    reply=_content,
    with_tools=st.booleans(),
)
def test_prefix_stability_in_tokens(tok, first, rest, reply, with_tools):
    """ids(messages + generation prompt) is a prefix of ids(messages + [assistant reply]), and
    ids(messages[:k]) is a prefix of ids(messages) for every k."""
    messages = [first, *rest]
    tools = [MOVE] if with_tools else None
    prompt = render_ids(tok, messages, tools=tools, add_generation_prompt=True)
    full = render_ids(tok, [*messages, assistant(reply)], tools=tools)
    assert full[: len(prompt)] == prompt
    whole = render_ids(tok, messages, tools=tools)
    for k in range(1, len(messages)):
        part = render_ids(tok, messages[:k], tools=tools)
        assert whole[: len(part)] == part
