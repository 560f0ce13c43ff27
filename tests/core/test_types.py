"""Message constructors, actions as messages and their text, and the Episode's derived
properties."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from agentgym.core import (
    Episode,
    Turn,
    action_text,
    as_assistant_message,
    assistant,
    is_turn,
    parse_action,
    system,
    tool_call,
    tool_message,
    user,
)


def test_constructors_build_openai_shaped_dicts() -> None:
    assert system("be brief") == {"role": "system", "content": "be brief"}
    assert user("hi") == {"role": "user", "content": "hi"}
    assert assistant(None) == {"role": "assistant", "content": None}
    assert tool_message("42", "call_0", "add") == {
        "role": "tool",
        "content": "42",
        "tool_call_id": "call_0",
        "name": "add",
    }


def test_tool_call_serialises_arguments_as_json_text_keeping_unicode() -> None:
    call = tool_call("call_1", "say", {"text": "héllo 中文", "n": 2})
    assert call == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "say", "arguments": '{"text": "héllo 中文", "n": 2}'},
    }
    assert json.loads(call["function"]["arguments"]) == {"text": "héllo 中文", "n": 2}


def test_assistant_omits_empty_tool_calls() -> None:
    assert "tool_calls" not in assistant("text", [])
    call = tool_call("c", "f", {})
    assert assistant("text", [call])["tool_calls"] == [call]


def test_as_assistant_message_wraps_text_and_passes_dicts_through() -> None:
    assert as_assistant_message("go left") == {"role": "assistant", "content": "go left"}
    message = assistant(None, [tool_call("c", "f", {})])
    assert as_assistant_message(message) is message


PARTS = [{"type": "text", "text": "go "}, {"type": "image"}, {"type": "text", "text": "left"}]
TURNS: list[tuple[Any, str]] = [
    ("go left", "go left"),
    ({"role": "assistant", "content": "go left"}, "go left"),
    ({"content": "go left"}, "go left"),  # a dict without a role is an assistant turn
    (assistant(None, [tool_call("c", "move", {"direction": "left"})]), ""),
    (assistant("go left", [tool_call("c", "move", {"direction": "left"})]), "go left"),
    ({"role": "assistant", "content": PARTS}, "go left"),  # OpenAI content parts
]
NOT_TURNS: list[Any] = [{"role": "user", "content": "go left"}, None, 7, ["go left"]]


@pytest.mark.parametrize(("action", "text"), TURNS)
def test_action_text_reads_every_form_of_a_turn(action: Any, text: str) -> None:
    assert is_turn(action)
    assert action_text(action) == text
    assert parse_action(action).content == text  # the parser reads the same text


@pytest.mark.parametrize("action", NOT_TURNS)
def test_anything_else_is_no_turn_and_has_no_text(action: Any) -> None:
    assert not is_turn(action)
    assert action_text(action) == ""
    assert parse_action(action).malformed  # answered as a malformed action


def _turn(
    reward: float, *, terminated: bool = False, truncated: bool = False, **info: object
) -> Turn:
    return Turn(assistant("a"), (user("o"),), reward, terminated, truncated, dict(info))


def test_episode_properties_follow_its_turns() -> None:
    episode = Episode(
        "agentgym/FrozenLake-v0", turns=[_turn(0.0), _turn(-0.5), _turn(1.0, terminated=True)]
    )
    assert episode.rewards == [0.0, -0.5, 1.0]
    assert episode.total_reward == 0.5
    assert isinstance(episode.total_reward, float)
    assert episode.terminated
    assert not episode.truncated
    assert not episode.infra_error


def test_empty_episode_is_neither_terminated_nor_truncated() -> None:
    episode = Episode(None)
    assert episode.total_reward == 0.0
    assert not episode.terminated
    assert not episode.truncated


def test_episode_reports_an_infra_error_on_any_turn() -> None:
    episode = Episode(None, turns=[_turn(0.0, infra_error=True), _turn(1.0, truncated=True)])
    assert episode.infra_error
    assert episode.truncated


def test_episode_pickles_and_its_lists_are_not_shared_between_instances() -> None:
    one, two = Episode(None), Episode(None)
    one.token_ids.append(1)
    assert two.token_ids == []
    episode = Episode("x", messages=[user("hi")], turns=[_turn(1.0)], token_ids=[1, 2])
    assert pickle.loads(pickle.dumps(episode)) == episode
