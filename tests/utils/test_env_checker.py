"""check_env: a good env passes; each contract violation is found, named, and collected."""

from __future__ import annotations

import json
import random
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import gymnasium as gym
import jsonschema
import numpy as np
import pytest

import agentgym
from agentgym.core import AgentEnv, Observation, StepResult, system, tool, user
from agentgym.error import EnvCheckError
from agentgym.registry import _ENVS
from agentgym.utils import CheckReport, check_env
from agentgym.utils.env_checker import MAX_ECHO_CHARS, garbage_actions
from agentgym.wrappers import FullConversation


@tool
def guess(number: int, note: str | None = None) -> str:
    """Guess the hidden number.

    Args:
        number: your guess.
        note: anything to remember.
    """
    return f"you guessed {number}"


class GoodEnv(AgentEnv):
    """Guess a seeded number; ``guess`` answers, the right number as text ends the episode."""

    def __init__(self, hint: Any = None, **kwargs: Any) -> None:
        super().__init__(tools=[guess], **kwargs)
        self.hint = hint

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        self.number = int(self.np_random.integers(0, 10))
        self.turns = 0
        return (system("Guess."), user("A number from 0 to 9.")), {"tools": self.tool_schemas()}

    async def astep(self, action: Any) -> StepResult:
        self.turns += 1
        parsed = self.parse(action)
        won = not parsed.has_calls and parsed.content.strip() == str(self.number)
        if parsed.has_calls:
            obs = await self.run_tool_calls(parsed)
        else:
            obs = (user("Right." if won else "Wrong."),)
        return obs, float(won), won, self.turns >= 3, {"turn": self.turns}


@pytest.fixture
def register() -> Iterator[Callable[..., str]]:
    ids: list[str] = []

    def _register(cls: type, **kwargs: Any) -> str:
        env_id = f"checkertest/{cls.__name__}-v0"
        ids.append(env_id)
        agentgym.register(env_id, f"{__name__}:{cls.__name__}", **kwargs)
        return env_id

    yield _register
    for env_id in ids:
        gym.registry.pop(env_id, None)
        _ENVS.pop(env_id, None)


def _failures(env: gym.Env[Any, Any]) -> list[str]:
    with pytest.raises(EnvCheckError) as caught:
        check_env(env)
    return caught.value.failures


def _has(failures: list[str], *parts: str) -> bool:
    return any(all(p in f for p in parts) for f in failures)


# --- passing -----------------------------------------------------------------------------------


def test_a_good_env_made_by_gym_make_passes_every_check(register: Callable[..., str]) -> None:
    env_id = register(GoodEnv, max_episode_steps=5)
    report = check_env(gym.make(env_id), seed=3)
    assert isinstance(report, CheckReport)
    assert report.env_name == env_id
    assert report.checks == (
        "spaces",
        "reset info",
        "determinism",
        "samples",
        "garbage actions",
        "fresh data",
        "spec",
        "close",
    )
    assert report.num_checks == 8
    assert report.skipped == ()
    assert report.steps > len(garbage_actions([guess.schema()], 3))


def test_an_unregistered_env_passes_without_the_spec_check() -> None:
    report = check_env(GoodEnv())
    assert "spec" not in report.checks
    assert report.skipped == ("spec (the env was not made by gym.make)",)


def test_check_env_closes_the_env() -> None:
    env = GoodEnv()
    check_env(env)
    assert env._closed


def test_the_full_conversation_wrapper_passes() -> None:
    check_env(FullConversation(GoodEnv()))


# --- failing -----------------------------------------------------------------------------------


def test_a_non_agent_env_is_rejected_at_once() -> None:
    failures = _failures(gym.make("CartPole-v1"))
    assert failures == ["env.unwrapped is CartPoleEnv, not an AgentEnv"]


class TextSpaceEnv(GoodEnv):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Text(100)


def test_gymnasium_text_space_is_rejected() -> None:
    failures = _failures(TextSpaceEnv())
    assert _has(failures, "[spaces]", "not agentgym.core.spaces.Messages")
    assert _has(failures, "[spaces]", "observation_space is gymnasium.spaces.Text")
    assert _has(failures, "not in observation_space")


class UnseededEnv(GoodEnv):
    async def areset(self, **kwargs: Any) -> tuple[Observation, dict[str, Any]]:
        _, info = await super().areset(**kwargs)
        return (user(f"task {random.random()}"),), info  # ignores the seed


def test_unseeded_reset_is_found(register: Callable[..., str]) -> None:
    failures = _failures(gym.make(register(UnseededEnv)))
    assert _has(failures, "[determinism] reset observation differs between two runs with seed=0")


def test_nondeterministic_specs_skip_the_determinism_check(register: Callable[..., str]) -> None:
    report = check_env(gym.make(register(UnseededEnv, nondeterministic=True)))
    assert "determinism" not in report.checks
    assert report.skipped == ("determinism (spec.nondeterministic)",)


class UnseededStepEnv(GoodEnv):
    async def astep(self, action: Any) -> StepResult:
        obs, reward, terminated, truncated, info = await super().astep(action)
        return obs, reward, terminated, truncated, {**info, "noise": random.random()}


def test_a_nondeterministic_first_step_is_found() -> None:
    assert _has(_failures(UnseededStepEnv()), "[determinism] first step info differs")


def _schema(name: str, parameters: Any = None, description: Any = "d") -> dict[str, Any]:
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


BAD_TOOLS = [
    _schema("has space"),
    _schema("no_description", description=None),
    _schema("array_params", {"type": "array"}),
    _schema("invalid_schema", {"type": "object", "properties": {"x": {"type": "no-such-type"}}}),
    _schema("twice"),
    _schema("twice"),
    {"type": "function"},
    {"name": "flat", "parameters": {}},
]


class BadToolsEnv(GoodEnv):
    async def areset(self, **kwargs: Any) -> tuple[Observation, dict[str, Any]]:
        obs, _ = await super().areset(**kwargs)
        return obs, {"tools": json.loads(json.dumps(BAD_TOOLS))}


def test_bad_tool_schemas_are_each_named() -> None:
    failures = [f for f in _failures(BadToolsEnv()) if f.startswith("[reset info]")]
    assert _has(failures, "tool name 'has space' does not match")
    assert _has(failures, "tool 'no_description' has no description string")
    assert _has(failures, "tool 'array_params': parameters", "is not an object")
    assert _has(failures, "tool 'invalid_schema': parameters is not valid JSON Schema")
    assert _has(failures, "more than once: ['twice']")
    assert _has(failures, "has no 'function' object")
    assert _has(failures, "{'name': 'flat'", 'is not {"type": "function"')
    assert len(failures) == 7


class NoToolsKeyEnv(GoodEnv):
    async def areset(self, **kwargs: Any) -> tuple[Observation, dict[str, Any]]:
        obs, _ = await super().areset(**kwargs)
        return obs, {}


def test_reset_info_must_list_tools() -> None:
    assert _failures(NoToolsKeyEnv()) == [
        '[reset info] reset info["tools"] is None, not a list of tool schemas'
    ]


class FragileEnv(GoodEnv):
    async def astep(self, action: Any) -> StepResult:
        if not isinstance(action, str) or not action or "\x00" in action:
            raise ValueError("cannot handle that")
        return await super().astep(action)


def test_garbage_actions_must_not_raise() -> None:
    failures = _failures(FragileEnv())
    raised = [f for f in failures if "raised ValueError: 'cannot handle that'" in f]
    assert len(raised) == 1  # one root cause, one line
    # empty string, random unicode x4 (each starts with NUL), structured x2 and one per tool
    assert raised[0].startswith("[garbage actions] raised ValueError: 'cannot handle that'")
    assert raised[0].endswith(
        "(8 times: step(<empty string>), step(<random unicode (1 chars)>), "
        "step(<random unicode (64 chars)>) and 5 more)"
    )


class EchoEnv(GoodEnv):
    async def astep(self, action: Any) -> StepResult:
        obs, *rest = await super().astep(action)
        return (*obs, user(f"You said: {action}")), *rest  # type: ignore[return-value]


def test_echoing_a_huge_action_is_found() -> None:
    failures = _failures(EchoEnv())
    assert _has(
        failures,
        "[garbage actions] step(<1 MB of text>) answered with messages of",
        f"under {MAX_ECHO_CHARS}",
    )


class SharingEnv(GoodEnv):
    CACHED = user("the same dict every time")

    async def astep(self, action: Any) -> StepResult:
        _, *rest = await super().astep(action)
        return (self.CACHED,), *rest  # type: ignore[return-value]


def test_returning_the_same_mutable_message_twice_is_found() -> None:
    assert _has(
        _failures(SharingEnv()),
        "[fresh data] the observations returned by step (call 2) and step (call 3)",
    )


class SharingInfoEnv(GoodEnv):
    INFO: ClassVar[dict[str, Any]] = {"tools": []}

    async def areset(self, **kwargs: Any) -> tuple[Observation, dict[str, Any]]:
        obs, _ = await super().areset(**kwargs)
        return obs, self.INFO


def test_returning_the_same_info_dict_twice_is_found() -> None:
    assert _has(
        _failures(SharingInfoEnv()), "[fresh data] the infos returned by reset (call 1) and reset"
    )


class BadTypesEnv(GoodEnv):
    async def astep(self, action: Any) -> StepResult:
        obs, *_ = await super().astep(action)
        return obs, 1, np.bool_(False), 0, ["not", "a", "dict"]  # type: ignore[return-value]


def test_step_value_types_are_checked() -> None:
    failures = _failures(BadTypesEnv())
    assert _has(failures, "returned reward 1: it must be a finite float")
    assert _has(failures, "returned terminated=", "(numpy.bool", "), not a bool")
    assert _has(failures, "returned truncated=0 (int), not a bool")
    assert _has(failures, "returned info of type list, not dict")


class NanRewardEnv(GoodEnv):
    async def astep(self, action: Any) -> StepResult:
        obs, _, *rest = await super().astep(action)
        return obs, float("nan"), *rest  # type: ignore[return-value]


def test_non_finite_rewards_are_found() -> None:
    assert _has(_failures(NanRewardEnv()), "returned reward nan: it must be a finite float")


class AssistantObservationEnv(GoodEnv):
    async def astep(self, action: Any) -> StepResult:
        _, *rest = await super().astep(action)
        return ({"role": "assistant", "content": "I speak for the model"},), *rest  # type: ignore[return-value]


def test_observations_outside_the_space_are_found() -> None:
    assert _has(
        _failures(AssistantObservationEnv()), "returned an observation not in observation_space"
    )


class StaysOpenEnv(GoodEnv):
    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        self.number, self.turns = 4, 0  # never calls super().areset: no closed-state check
        return (user("A number from 0 to 9."),), {"tools": self.tool_schemas()}


def test_reset_after_close_must_raise_env_state_error() -> None:
    assert _failures(StaysOpenEnv()) == [
        "[close] reset after close did not raise agentgym.error.EnvStateError"
    ]


def test_an_unpicklable_spec_is_found(register: Callable[..., str]) -> None:
    env = gym.make(register(GoodEnv), hint=lambda: "not serialisable")
    assert _has(_failures(env), "[spec] raised")


class AlwaysRaisesEnv(GoodEnv):
    async def astep(self, action: Any) -> StepResult:
        raise RuntimeError("broken step")


def test_every_check_runs_and_every_failure_is_collected() -> None:
    with pytest.raises(EnvCheckError) as caught:
        check_env(AlwaysRaisesEnv())
    failures = caught.value.failures
    checks = "determinism, samples, garbage actions, fresh data"
    assert _has(failures, f"[{checks}] raised RuntimeError: 'broken step' (")
    assert str(caught.value).startswith(
        f"AlwaysRaisesEnv fails {len(failures)} agentgym env check(s):"
    )


def test_one_root_cause_is_one_line_with_its_count() -> None:
    """An env whose step always raises: one line naming the error, the checks and the count,
    not one line per check and per garbage action."""
    with pytest.raises(EnvCheckError) as caught:
        check_env(AlwaysRaisesEnv())
    message = str(caught.value)
    assert caught.value.failures == [
        "[determinism, samples, garbage actions, fresh data] raised RuntimeError: 'broken step' "
        "(21 times: determinism, samples, step(<empty string>) and 18 more)"
    ]
    assert message.count("broken step") == 1
    assert message.startswith("AlwaysRaisesEnv fails 1 agentgym env check(s):")


class WrongSuccessTypeEnv(GoodEnv):
    async def astep(self, action: Any) -> StepResult:
        obs, reward, terminated, truncated, info = await super().astep(action)
        return obs, reward, terminated, truncated, {**info, "success": "maybe"}


def test_the_same_info_problem_on_every_step_is_one_line() -> None:
    failures = _failures(WrongSuccessTypeEnv())
    lines = [f for f in failures if "success 'maybe'" in f]
    assert len(lines) == 1
    assert lines[0].startswith("[determinism, samples, garbage actions, fresh data] info: ")
    assert " times: first step(" in lines[0]


# --- the garbage itself ------------------------------------------------------------------------


def _all_text(actions: list[tuple[str, Any]]) -> str:
    return "".join(a if isinstance(a, str) else json.dumps(a) for _, a in actions)


def test_garbage_covers_the_nasty_unicode_and_no_surrogates() -> None:
    text = _all_text(garbage_actions([], seed=0))
    text.encode("utf-8")  # would raise on a lone surrogate
    categories = {unicodedata.category(c) for c in text}
    assert "\x00" in text
    assert {"Cc", "Mn", "So"} <= categories  # controls, combining marks, emoji
    assert any(unicodedata.bidirectional(c) in ("R", "AL") for c in text)  # right-to-left


def test_garbage_is_reproducible_per_seed() -> None:
    assert garbage_actions([], seed=1) == garbage_actions([], seed=1)
    assert garbage_actions([], seed=1) != garbage_actions([], seed=2)


def test_garbage_includes_a_megabyte_and_malformed_calls() -> None:
    actions = dict(garbage_actions([], seed=0))
    assert len(actions["1 MB of text"]) >= 1_000_000
    assert actions["empty string"] == ""
    assert actions["tool call that is not JSON"] == "<tool_call>{not json</tool_call>"
    assert actions["unclosed tool call"] == '<tool_call>{"name": "x"'
    assert "function" not in actions["structured call without function"]["tool_calls"][0]


def test_wrong_type_arguments_really_break_each_tools_schema() -> None:
    schema = guess.schema()
    actions = dict(garbage_actions([schema], seed=0))
    body = (
        actions["wrong argument types for guess"]
        .removeprefix("<tool_call>")
        .removesuffix("</tool_call>")
    )
    arguments = json.loads(body)["arguments"]
    assert set(arguments) == {"number", "note"}
    properties = schema["function"]["parameters"]["properties"]
    for key, value in arguments.items():
        assert not jsonschema.Draft202012Validator(properties[key]).is_valid(value)
    assert '"arguments": "not an object"' in actions['guess with "arguments": "not an object"']
    structured = actions["structured guess call with non-JSON arguments"]
    assert structured["tool_calls"][0]["function"]["arguments"] == "{not json"
