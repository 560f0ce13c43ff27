"""Messages and AssistantTurn: what they contain, what they sample, how they batch."""

from __future__ import annotations

import pickle
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array
from hypothesis import given
from hypothesis import strategies as st

from agentgym.core import AssistantTurn, Messages, assistant, is_valid_message, tool_call, user
from agentgym.core.parsing import parse_hermes
from agentgym.error import ConfigError

TOOL_MESSAGE = {"role": "tool", "content": "4", "tool_call_id": "call_0", "name": "add"}


@pytest.mark.parametrize(
    "message",
    [
        user("hi"),
        {"role": "system", "content": ""},
        TOOL_MESSAGE,
        assistant(None, [tool_call("c", "add", {"a": 1})]),
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
            ],
        },
        {"role": "user", "content": "emoji 😀 rtl שלום nul \x00"},
    ],
)
def test_valid_messages(message: dict[str, Any]) -> None:
    assert is_valid_message(message)


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ({"role": "robot", "content": "x"}, "unknown role"),
        ({"role": "user"}, "no content"),
        ({"role": "user", "content": None}, "None content outside assistant"),
        ({"role": "user", "content": 3}, "content not text"),
        ({"role": "user", "content": "x", "extra": 1}, "unknown key"),
        ({"role": "tool", "content": "x"}, "tool message without tool_call_id"),
        ({"role": "user", "content": "x", "tool_calls": []}, "tool_calls outside assistant"),
        (
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
            "call without function",
        ),
        (
            {"role": "assistant", "content": None, "tool_calls": {"id": "c"}},
            "tool_calls not a list",
        ),
        ({"role": "user", "content": "x", "name": 5}, "name not text"),
        ("user: hi", "not a dict"),
    ],
)
def test_invalid_messages(message: Any, why: str) -> None:
    assert not is_valid_message(message), why


def test_max_length_bounds_content() -> None:
    assert is_valid_message(user("abc"), max_length=3)
    assert not is_valid_message(user("abcd"), max_length=3)


def test_messages_contains_tuples_of_allowed_roles_only() -> None:
    space = Messages(max_messages=2)
    assert (user("a"), TOOL_MESSAGE) in space
    assert () in space
    assert [user("a")] not in space  # a list is not an observation
    assert (user("a"),) * 3 not in space
    assert (assistant("a"),) not in space  # envs add system, user and tool messages by default
    assert (assistant("a"),) in Messages(roles=("assistant",))


def test_assistant_turn_contains_text_and_assistant_messages() -> None:
    space = AssistantTurn(max_length=5)
    assert "hello" in space
    assert "hello!" not in space
    assert assistant("hi") in space
    assert assistant(None, [tool_call("c", "f", {})]) in space
    assert user("hi") not in space
    assert 5 not in space


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: Messages(max_messages=0), "max_messages"),
        (lambda: Messages(roles=("user", "robot")), "roles"),
        (lambda: AssistantTurn(max_length=0), "max_length"),
    ],
)
def test_bad_arguments_raise_config_error(make: Any, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        make()


@pytest.mark.parametrize("space", [Messages(), AssistantTurn()])
def test_sample_takes_no_mask(space: gym.Space[Any]) -> None:
    with pytest.raises(ConfigError):
        space.sample(mask=1)


SPACES = st.sampled_from(
    [
        Messages(),
        Messages(max_messages=1, max_length=1, roles=("tool",)),
        Messages(roles=("system", "user", "assistant", "tool")),
        AssistantTurn(),
        AssistantTurn(max_length=3),
        AssistantTurn(tool_names=("move", "look")),
    ]
)


@given(space=SPACES, seed=st.integers(0, 2**32 - 1))
def test_every_sample_is_contained_and_valid_text(space: gym.Space[Any], seed: int) -> None:
    space.seed(seed)
    for _ in range(5):
        sample = space.sample()
        assert sample in space
        texts = [sample] if isinstance(sample, str) else [m["content"] for m in sample]
        for text in texts:
            text.encode("utf-8")  # no lone surrogates


@given(space=SPACES, seed=st.integers(0, 2**32 - 1))
def test_seeded_samples_reproduce(space: gym.Space[Any], seed: int) -> None:
    space.seed(seed)
    first = [space.sample() for _ in range(3)]
    space.seed(seed)
    assert [space.sample() for _ in range(3)] == first


@given(space=SPACES)
def test_pickle_round_trip_keeps_equality(space: gym.Space[Any]) -> None:
    copy = pickle.loads(pickle.dumps(space))
    assert copy == space
    assert hash(copy) == hash(space)


def test_spaces_with_different_parameters_differ() -> None:
    assert Messages(max_messages=2) != Messages(max_messages=3)
    assert Messages(roles=("user",)) != Messages(roles=("tool",))
    assert AssistantTurn(tool_names=("a",)) != AssistantTurn(tool_names=("b",))
    assert Messages() != AssistantTurn()


def test_assistant_turn_samples_hermes_calls_to_declared_tools() -> None:
    space = AssistantTurn(tool_names=("move",), seed=0)
    calls = [c for _ in range(50) for c in parse_hermes(space.sample()).calls]
    assert calls, "half the samples should carry a tool call"
    assert {c.name for c in calls} == {"move"}


def test_jsonable_round_trip() -> None:
    obs = [(user("a"),), (TOOL_MESSAGE, user("b"))]
    space = Messages()
    assert space.from_jsonable(space.to_jsonable(obs)) == obs
    actions = ["x", assistant("y")]
    assert AssistantTurn().from_jsonable(AssistantTurn().to_jsonable(actions)) == actions


@pytest.mark.parametrize(("space", "empty"), [(Messages(), ()), (AssistantTurn(), "")])
def test_vector_utilities_batch_them_as_tuples(space: gym.Space[Any], empty: Any) -> None:
    assert create_empty_array(space, n=3) == (empty, empty, empty)
    assert isinstance(batch_space(space, 2), gym.spaces.Tuple)
    items = [space.sample(), space.sample()]
    assert concatenate(space, items, create_empty_array(space, n=2)) == tuple(items)


def test_not_flattenable_to_numpy() -> None:
    assert not Messages().is_np_flattenable
    assert not AssistantTurn().is_np_flattenable
