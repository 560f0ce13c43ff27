"""The action grammar: parsing text and tool calls, choices, and garbage that never crashes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.envs.web.actions import TOOLS, WebAction, action_choices, from_arguments, parse
from agentgym.envs.web.observe import Node, PageView


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ("click(12)", "click", {"element": 12}),
        ('  fill(3, "rain jacket")  ', "fill", {"element": 3, "text": "rain jacket"}),
        ("fill(3, 'it\\'s \"quoted\"')", "fill", {"element": 3, "text": "it's \"quoted\""}),
        ('select_option(9, value="M")', "select_option", {"element": 9, "value": "M"}),
        ('press("Enter")', "press", {"key": "Enter"}),
        ('scroll("down")', "scroll", {"direction": "down"}),
        ("go_back()", "go_back", {}),
        ('goto("/cart")', "goto", {"url": "/cart"}),
        ("stop()", "stop", {"answer": ""}),
        ('stop("42")', "stop", {"answer": "42"}),
        ("I will search first.\n```\nclick(4)\n```", "click", {"element": 4}),
        ("```python\nhover(7)\n```", "hover", {"element": 7}),
        ("Thought: the button is [5].\nAction: click(5)", "click", {"element": 5}),
        ("```click(1)``` then ```click(2)```", "click", {"element": 2}),
    ],
)
def test_parse_reads_actions(text: str, name: str, arguments: dict[str, Any]) -> None:
    action = parse(text)
    assert action == WebAction(name, arguments)
    assert parse(action.text()) == action  # the canonical text reads back


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no action"),
        ("click me please", "could not read"),
        ("click(twelve)", "numbers or quoted strings"),
        ('click("12")', "id number"),
        ("click(True)", "id number"),
        ("fill(3)", "needs text"),
        ("click(1, 2)", "takes 1 argument"),
        ('scroll("left")', '"up" or "down"'),
        ("__import__('os').system('echo hi')", "not an action"),
        ("eval('1')", "unknown action"),
        ("click(x=1)", "not x"),
        ("click(1, element=2)", "repeated"),
    ],
)
def test_parse_explains_bad_actions(text: str, says: str) -> None:
    reason = parse(text)
    assert isinstance(reason, str)
    assert says in reason


def test_tool_schemas_name_the_actions() -> None:
    names = [t.schema()["function"]["name"] for t in TOOLS]
    assert names == [
        "click", "fill", "select_option", "press", "hover", "scroll", "go_back", "goto", "stop"
    ]
    fill = TOOLS[1].schema()["function"]["parameters"]
    assert fill["properties"]["element"]["type"] == "integer"
    assert set(fill["required"]) == {"element", "text"}
    assert from_arguments("fill", {"element": 2, "text": "x"}) == WebAction(
        "fill", {"element": 2, "text": "x"}
    )
    assert "unknown action" in str(from_arguments("rm", {}))


def test_choices_cover_clicks_and_options_then_stop() -> None:
    view = PageView(
        "http://x.test/",
        "",
        (
            Node(1, "link", "Home"),
            Node(None, "text", "hello"),
            Node(2, "textbox", "Search", value=""),
            Node(3, "combobox", "Size", value="S", options=("S", "M", "M")),
            Node(4, "checkbox", "I agree", checked=False),
        ),
    )
    choices = action_choices(view, limit=10)
    assert choices == [
        "click(1)", 'select_option(3, "S")', 'select_option(3, "M")', "click(4)", 'stop("")'
    ]
    assert all(isinstance(parse(c), WebAction) for c in choices)
    assert action_choices(view, limit=3) == []  # too many: none offered


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_parse_never_raises_on_any_text(text: str) -> None:
    assert isinstance(parse(text), WebAction | str)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["click", "fill", "select_option", "press", "scroll", "goto", "stop"]),
    st.lists(st.one_of(st.integers(), st.text(max_size=20), st.booleans(), st.none()), max_size=3),
)
def test_parse_never_raises_on_any_call(name: str, args: list[Any]) -> None:
    text = f"{name}({', '.join(repr(a) for a in args)})"
    assert isinstance(parse(text), WebAction | str)
    assert isinstance(from_arguments(name, dict(enumerate(args))), WebAction | str)  # type: ignore[arg-type]


GARBAGE: list[Any] = [
    "",
    "click(999)",
    'fill(1, "x")',
    'select_option(1, "nope")',
    'press("NoSuchKey")',
    'goto("http://example.com/")',
    'goto("javascript:alert(1)")',
    "go_back()",
    "x" * 50_000,
    "click(" * 5000,
    "<tool_call>{not json</tool_call>",
    '<tool_call>{"name": "click", "arguments": {"element": "a"}}</tool_call>',
    '<tool_call>{"name": "rm", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "click", "arguments": {"element": 1}}</tool_call>'
    '<tool_call>{"name": "click", "arguments": {"element": 2}}</tool_call>',
    {"role": "assistant", "content": None, "tool_calls": []},
    {"role": "user", "content": "click(1)"},
    12,
    None,
]


def test_garbage_actions_are_observations_never_crashes(make_env: Any) -> None:
    env = make_env(max_steps=len(GARBAGE) + 1, invalid_action_penalty=-0.1)
    env.reset(seed=0, options={"task_id": "press"})
    for action in GARBAGE:
        observation, reward, terminated, truncated, info = env.step(action)
        assert not terminated, (action, info)
        assert not truncated, (action, info)
        assert info["invalid_action"] is True, action
        assert reward == pytest.approx(-0.1)
        assert "infra_error" not in info
        assert "Last action error: none" not in observation[0]["content"], action
    # The page still works afterwards.
    observation, _, _, _, info = env.step("click(3)")
    assert info["invalid_action"] is False, observation[0]["content"]
    assert 'text "clicked 1"' in observation[0]["content"]
