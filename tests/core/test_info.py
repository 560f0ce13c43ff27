"""The typed info contract: one definition of success, and check_env validating every key."""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import pytest

import agentgym
from agentgym.core import AgentEnv, Episode, Observation, StepResult, Turn, assistant, user
from agentgym.core import info as keys
from agentgym.error import EnvCheckError
from agentgym.recipes.report import EvalResult
from agentgym.registry import _ENVS


@pytest.mark.parametrize(
    ("info", "where", "kwargs", "match"),
    [
        ({"task_id": 1.5}, "step", {}, "task_id 1.5 is not a str, an int or None"),
        ({"task_id": True}, "reset", {}, "task_id True is not a str, an int or None"),
        ({"state": ("a", 1)}, "step", {}, "state .* is not a str"),
        ({"action_choices": []}, "step", {}, "not a non-empty list of str"),
        ({"action_choices": "up"}, "reset", {}, "not a non-empty list of str"),
        ({"action_choices": ["up", "up"]}, "step", {}, "repeats a choice"),
        ({"success": 1}, "step", {}, "success 1 is a int, not bool"),
        ({"infra_error": "yes"}, "step", {}, "infra_error 'yes' is a str, not bool"),
        ({"error": 3}, "step", {}, "error 3 is a int, not str"),
        ({"reward_components": {"a": 0.5}}, "step", {"reward": 1.0}, "sum to 0.5, not"),
        ({"reward_components": {"a": float("nan")}}, "step", {}, "finite floats"),
        ({"reward_components": [("a", 1.0)]}, "step", {"reward": 1.0}, "not a dict"),
        ({"truncation_reason": "max_turns"}, "step", {}, "not truncated"),
        ({"truncation_reason": ""}, "step", {"truncated": True}, "non-empty str"),
        ({"success": True}, "reset", {}, "success belongs to step infos"),
        ({"outcome": "won"}, "step", {}, "outcome 'won' is not one of"),
        ({"outcome": "infra"}, "step", {}, "outcome 'infra' without infra_error=True"),
        ({"outcome": "failed"}, "reset", {}, "outcome belongs to step infos"),
        ({"timed_out": "yes"}, "step", {}, "timed_out 'yes' is a str, not bool"),
        ({"invalid_action": 1}, "step", {}, "invalid_action 1 is a int, not bool"),
    ],
)
def test_problems_names_each_broken_rule(
    info: dict[str, Any], where: Any, kwargs: dict[str, Any], match: str
) -> None:
    found = keys.problems(info, where, **kwargs)
    assert found
    assert any(re.search(match, p) for p in found), found


def test_a_valid_info_has_no_problems() -> None:
    info = {
        "task_id": "t1",
        "state": "s",
        "action_choices": ["a", "b"],
        "success": True,
        "reward_components": {"goal": 1.0, "edge": -0.25},
        "truncation_reason": "max_turns",
        "infra_error": False,
        "anything_else": object(),  # env-specific keys are the env's business
    }
    assert keys.problems(info, "step", reward=0.75, truncated=True) == []
    assert keys.return_problems(0.75, (0.0, 1.0)) == []
    assert keys.return_problems(1.5, (0.0, 1.0))


def _episode(*infos: dict[str, Any], reward: float = 1.0) -> Episode:
    turns = [Turn(assistant("a"), (), reward, False, False, info) for info in infos]
    return Episode(None, turns=turns)


def test_success_is_the_last_steps_say_and_never_the_reward() -> None:
    assert _episode({"success": False}, {"success": True}).success is True
    assert _episode({"success": True}, {"success": False}).success is False
    assert _episode({"success": True}, {}).success is None
    assert _episode({}, reward=5.0).success is None  # a positive return is not a success


def _ended(*infos: dict[str, Any], truncated: bool = False, reset: Any = None) -> Episode:
    turns = [Turn(assistant("a"), (), 0.0, False, False, dict(info)) for info in infos]
    if turns:
        turns[-1].terminated, turns[-1].truncated = not truncated, truncated
    return Episode(None, turns=turns, reset_info=dict(reset or {}))


INFRA = {"infra_error": True, "error": "sandbox gone"}


@pytest.mark.parametrize(
    ("episode", "outcome"),
    [
        (_ended({"success": True}), "success"),
        (_ended({"success": False}), "failed"),
        (_ended({}), "failed"),  # the env does not say: attempted, not known to be solved
        (_ended({"success": True}, {"success": False}), "failed"),  # the last step decides
        (_ended({"invalid_action": True}, {"invalid_action": True}), "invalid"),
        (_ended({"invalid_action": True}, {"invalid_action": False}), "failed"),
        (_ended({"invalid_action": True}, {}), "failed"),  # one step said nothing of it
        (_ended({"success": False}, truncated=True), "truncated"),
        (_ended({"invalid_action": True}, truncated=True), "truncated"),
        (_ended(reset={"truncation_reason": "context_length"}), "truncated"),  # no turn fit
        (_ended({"timed_out": True, "success": False}), "timeout"),
        (_ended({"timed_out": True}, truncated=True), "timeout"),  # scored, never dropped
        (_ended({"timed_out": True}, {"success": True}), "success"),  # a later step solved it
        (_ended({"success": True}, {**INFRA}), "infra"),
        (_ended({"timed_out": True, **INFRA}), "infra"),  # outside the model: infra wins
        (_ended({"success": True}, reset=INFRA), "infra"),
        (_ended(reset=INFRA), "infra"),
        (_ended({"success": False, "outcome": "invalid"}), "invalid"),  # the env's own say
        (_ended({"success": True, "outcome": "infra"}), "success"),  # only infra_error is infra
        (_ended({"outcome": "failed", **INFRA}), "infra"),
        (_ended({"outcome": "bogus", "success": True}), "success"),
    ],
)
def test_every_episode_ends_in_exactly_one_outcome(episode: Episode, outcome: str) -> None:
    assert episode.outcome == outcome
    assert episode.outcome in keys.OUTCOMES
    assert (episode.cause is not None) == (outcome == "infra")


def test_an_infra_episodes_cause_is_the_failing_calls_error() -> None:
    assert _ended({}, {**INFRA}).cause == "sandbox gone"
    assert _ended({}, {"infra_error": True}).cause.startswith("an infrastructure failure")


def test_eval_success_rate_counts_only_episodes_the_env_judged() -> None:
    result = EvalResult([("a", True, 1.0), ("b", None, 2.0), ("c", False, 0.0), ("d", None, 1.0)])
    assert (result.episodes, result.judged, result.successes) == (4, 2, 1)
    assert result.success_rate == 0.5
    assert result.to_dict()["success_unknown"] == 2


def test_an_evaluation_counts_every_outcome_and_names_the_scored_ones_beside_success() -> None:
    played = [
        _ended({"success": True}),
        _ended({"timed_out": True, "success": False}),
        _ended({"timed_out": True}),
        _ended({"success": False}, truncated=True),
        _ended({"success": False}),
        _ended({**INFRA}),
    ]
    result = EvalResult.of(played)
    assert result.classes == {"success": 1, "timeout": 2, "truncated": 1, "failed": 1, "infra": 1}
    assert result.to_dict()["outcomes"] == result.classes
    assert (result.judged, result.successes) == (4, 1)  # the timeout that says success: judged
    assert "2 timeout, 1 truncated; 1 failed outside the model" in result.describe()


class Faulty(AgentEnv):
    """Terminates on the second step; ``fault`` picks what its step info gets wrong."""

    def __init__(self, fault: str = "none") -> None:
        super().__init__()
        self.fault = fault

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        self.turn = 0
        return (user("go"),), {"tools": [], "task_id": "t"}

    def step(self, action: Any) -> StepResult:
        self.turn += 1
        done = self.turn >= 2
        reward = 2.0 if done else 0.0
        info: dict[str, Any] = {"task_id": "t", "reward_components": {"win": reward}}
        if done:
            info["success"] = True
        if self.fault == "no_success":
            info.pop("success", None)
        elif self.fault == "components":
            info["reward_components"] = {"win": reward + 1}
        elif self.fault == "success_type" and done:
            info["success"] = "yes"
        elif self.fault == "reason":
            info["truncation_reason"] = "max_turns"
        return (user(str(self.turn)),), reward, done, False, info


@pytest.mark.parametrize(
    ("fault", "reward_range", "match"),
    [
        ("none", (0.0, 1.0), "outside the registered reward_range"),
        ("no_success", (0.0, 2.0), r"without info\['success'\]"),
        ("components", (0.0, 2.0), "sum to 3, not the reward 2"),
        ("success_type", (0.0, 2.0), "success 'yes' is a str"),
        ("reason", (0.0, 2.0), "on a step that is not truncated"),
    ],
)
def test_check_env_fails_an_env_that_breaks_the_contract(
    fault: str, reward_range: tuple[float, float], match: str
) -> None:
    agentgym.register(
        "testinfo/Faulty-v0", Faulty, reward_range=reward_range, kwargs={"fault": fault}
    )
    try:
        with pytest.raises(EnvCheckError, match=match):
            agentgym.utils.check_env(gym.make("testinfo/Faulty-v0"))
    finally:
        gym.registry.pop("testinfo/Faulty-v0")
        _ENVS.pop("testinfo/Faulty-v0")


def test_check_env_passes_the_same_env_without_faults() -> None:
    agentgym.register("testinfo/Faulty-v0", Faulty, reward_range=(0.0, 2.0))
    try:
        agentgym.utils.check_env(gym.make("testinfo/Faulty-v0"))
    finally:
        gym.registry.pop("testinfo/Faulty-v0")
        _ENVS.pop("testinfo/Faulty-v0")
