"""FullConversation and FlatText: the whole conversation, as messages or as one string."""

from __future__ import annotations

import json
import pickle
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.passive_env_checker import data_shares_objects
from gymnasium.vector.utils import create_empty_array

from agentgym.core import (
    AgentEnv,
    Messages,
    Observation,
    StepResult,
    assistant,
    system,
    tool,
    tool_call,
    user,
)
from agentgym.wrappers import FlatText, FullConversation, String, render_text


@tool
def shout(text: str) -> str:
    """Repeat the text loudly.

    Args:
        text: what to shout.
    """
    return text.upper()


class ShoutEnv(AgentEnv):
    """Answers tool calls, otherwise says which turn it is; two turns per episode."""

    def __init__(self) -> None:
        super().__init__(tools=[shout])

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        self.turns = 0
        return (system("Be loud."), user("Shout hi.")), {"tools": self.tool_schemas()}

    async def astep(self, action: Any) -> StepResult:
        self.turns += 1
        parsed = self.parse(action)
        obs = (
            await self.run_tool_calls(parsed) if parsed.has_calls else (user(f"turn {self.turns}"),)
        )
        return obs, 0.0, self.turns >= 2, False, {"turn": self.turns}


HERMES_SHOUT = '<tool_call>{"name": "shout", "arguments": {"text": "hi"}}</tool_call>'


def test_full_conversation_accumulates_every_message() -> None:
    env = FullConversation(ShoutEnv())
    obs, info = env.reset(seed=0)
    assert obs == (system("Be loud."), user("Shout hi."))
    assert [t["function"]["name"] for t in info["tools"]] == ["shout"]

    obs, reward, terminated, truncated, info = env.step(HERMES_SHOUT)
    assert obs == (
        system("Be loud."),
        user("Shout hi."),
        assistant(HERMES_SHOUT),
        {"role": "tool", "content": "HI", "tool_call_id": "call_1_0", "name": "shout"},
    )
    assert (reward, terminated, truncated, info) == (0.0, False, False, {"turn": 1})

    structured = assistant("again", [tool_call("mine", "shout", {"text": "yo"})])
    obs, *_ = env.step(structured)
    assert obs[4:] == (
        structured,
        {"role": "tool", "content": "YO", "tool_call_id": "mine", "name": "shout"},
    )

    obs, _ = env.reset(seed=0)
    assert obs == (system("Be loud."), user("Shout hi."))  # reset starts a new conversation


def test_full_conversation_space_allows_all_roles_and_contains_its_observations() -> None:
    env = FullConversation(ShoutEnv())
    space = env.observation_space
    assert isinstance(space, Messages)
    assert set(space.roles) == {"system", "user", "assistant", "tool"}
    assert env.action_space == env.env.action_space
    obs, _ = env.reset(seed=0)
    assert obs in space
    for action in (HERMES_SHOUT, "plain"):
        obs, *_ = env.step(action)
        assert obs in space


@pytest.mark.parametrize(
    ("action", "recorded"),
    [
        ({"role": "assistant", "content": "x", "tool_calls": [{"id": "c0"}]}, assistant("x")),
        ({"role": "assistant", "content": 5, "tool_calls": "nope"}, assistant(None)),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [tool_call("a", "shout", {}), None],
            },
            assistant(None, [tool_call("a", "shout", {})]),
        ),
    ],
)
def test_malformed_assistant_dicts_are_recorded_as_valid_messages(
    action: Any, recorded: Any
) -> None:
    env = FullConversation(ShoutEnv())
    env.reset(seed=0)
    obs, *_ = env.step(action)
    assert obs[2] == recorded
    assert obs in env.observation_space


def test_full_conversation_returns_fresh_objects() -> None:
    env = FullConversation(ShoutEnv())
    action = assistant("mutable?", [tool_call("c", "shout", {"text": "a"})])
    first, _ = env.reset(seed=0)
    second, *_ = env.step(action)
    third = env.conversation
    assert not data_shares_objects(first, second)
    assert not data_shares_objects(second, third)
    assert second[2] is not action
    second[0]["content"] = "tampered"
    action["content"] = "tampered too"
    assert env.conversation[0]["content"] == "Be loud."
    assert env.conversation[2]["content"] == "mutable?"


def test_render_text_format() -> None:
    messages = (
        system("Be loud."),
        user("Shout hi."),
        assistant("Sure.", [tool_call("c0", "shout", {"text": "hi"})]),
        {"role": "tool", "content": "HI", "tool_call_id": "c0", "name": "shout"},
        {"role": "tool", "content": "anonymous", "tool_call_id": "c1"},
        assistant(None),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{bad"}}
            ],
        },
    )
    assert render_text(messages) == (
        "system: Be loud.\n\n"
        "user: Shout hi.\n\n"
        "assistant: Sure.\n"
        '<tool_call>{"name": "shout", "arguments": {"text": "hi"}}</tool_call>\n\n'
        "tool[shout]: HI\n\n"
        "tool: anonymous\n\n"
        "assistant: \n\n"
        'assistant: <tool_call>{"name": "f", "arguments": "{bad"}</tool_call>'
    )
    assert render_text(()) == ""


def test_flat_text_renders_the_whole_conversation() -> None:
    env = FlatText(ShoutEnv())
    assert isinstance(env.env, FullConversation)
    obs, _ = env.reset(seed=0)
    assert obs == "system: Be loud.\n\nuser: Shout hi."
    obs, *_ = env.step(HERMES_SHOUT)
    assert obs == (
        f"system: Be loud.\n\nuser: Shout hi.\n\nassistant: {HERMES_SHOUT}\n\ntool[shout]: HI"
    )
    assert obs in env.observation_space


def test_flat_text_reuses_an_existing_full_conversation() -> None:
    inner = FullConversation(ShoutEnv())
    assert FlatText(inner).env is inner


def test_flat_text_space_is_agentgyms_string_not_gymnasium_text() -> None:
    space = FlatText(ShoutEnv()).observation_space
    assert isinstance(space, String)
    assert not isinstance(space, gym.spaces.Text)
    assert "any unicode: 😀 שלום \x00 e\u0301" in space


def test_string_space() -> None:
    space = String(max_length=3, seed=0)
    assert all(x in space for x in ("abc", "", "é中😀"))
    assert not any(x in space for x in ("abcd", b"ab", None))
    for _ in range(20):
        assert space.sample() in space
    space.seed(5)
    first = [space.sample() for _ in range(3)]
    space.seed(5)
    assert [space.sample() for _ in range(3)] == first
    assert pickle.loads(pickle.dumps(space)) == space
    assert String(3) != String(4)
    assert space.from_jsonable(space.to_jsonable(["a", "b"])) == ["a", "b"]
    assert create_empty_array(space, n=2) == ("", "")
    assert not space.is_np_flattenable


def test_flat_text_batches_in_a_sync_vector_env() -> None:
    venv = gym.vector.SyncVectorEnv([lambda: FlatText(ShoutEnv()) for _ in range(2)])
    obs, _ = venv.reset(seed=[0, 1])
    assert obs == ("system: Be loud.\n\nuser: Shout hi.",) * 2
    obs, *_ = venv.step(("a", HERMES_SHOUT))
    assert obs[0].endswith("assistant: a\n\nuser: turn 1")
    assert obs[1].endswith("tool[shout]: HI")
    venv.close()


def test_tool_call_arguments_render_as_json() -> None:
    rendered = render_text([assistant(None, [tool_call("c", "shout", {"text": "中文"})])])
    body = rendered.removeprefix("assistant: <tool_call>").removesuffix("</tool_call>")
    assert json.loads(body) == {"name": "shout", "arguments": {"text": "中文"}}
