"""WebEnv's contract on the local test site: the checker, determinism, episodes solved by text
and by tool calls, truncation, action choices."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import agentgym
from agentgym.core.errors import ConfigError, EnvStateError
from agentgym.core.info import problems
from agentgym.core.parsing import call_format
from agentgym.envs.web.actions import WebAction, parse
from agentgym.utils import check_env

FORM_SOLUTION = ['fill(1, "Ada")', 'select_option(2, "M")', "click(4)"]


def test_the_env_passes_agentgym_checker(make_env: Any) -> None:
    check_env(make_env(max_steps=5))


def test_registered_with_a_site_of_your_own(chromium: str, site_url: str) -> None:
    from web_helpers import TASKS

    env = gym.make("agentgym/Web-v0", start_url=site_url, tasks=TASKS)
    try:
        assert "agentgym/Web-v0" in [e.id for e in agentgym.list_envs()]
        _, info = env.reset(seed=0, options={"task_id": "form"})
        assert info["url"].endswith("/form.html")
    finally:
        env.close()


def test_reset_is_deterministic_and_pins_tasks(make_env: Any) -> None:
    env = make_env()
    first = env.reset(seed=3)
    again = env.reset(seed=3)
    assert first[0] == again[0]
    assert first[1]["task_id"] == again[1]["task_id"]
    seen = {env.reset(seed=s)[1]["task_id"] for s in range(12)}
    assert seen == {"form", "press", "answer"}
    observation, info = env.reset(seed=0, options={"task_id": "form"})
    assert info["task_id"] == "form"
    assert problems(info, "reset") == []
    text = observation[1]["content"]
    assert text.startswith("Task: Send the form with the name Ada and size M.")
    assert '[2] combobox "Size" value="S" options=["S", "M", "L"]' in text
    assert observation[0]["role"] == "system"
    with pytest.raises(ConfigError, match="is not a task"):
        env.reset(options={"task_id": "nope"})


def test_text_actions_solve_a_task(make_env: Any) -> None:
    env = make_env()
    env.reset(seed=0, options={"task_id": "form"})
    for action in FORM_SOLUTION[:-1]:
        _, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated, info["success"]) == (0.0, False, False, False)
    observation, reward, terminated, truncated, info = env.step(f"```\n{FORM_SOLUTION[-1]}\n```")
    assert terminated
    assert not truncated
    assert reward == 1.0
    assert info["success"] is True
    assert info["reward_components"] == {"task": 1.0, "invalid_action": 0.0}
    assert problems(info, "step", reward=reward) == []
    assert "Hello, Ada (M)" in observation[0]["content"]
    with pytest.raises(EnvStateError):
        env.step("click(1)")


def test_tool_calls_are_answered_with_the_page(make_env: Any) -> None:
    env = make_env()
    _, info = env.reset(seed=0, options={"task_id": "press"})
    assert [t["function"]["name"] for t in info["tools"]][:2] == ["click", "fill"]
    turn = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "click", "arguments": '{"element": 3}'}}
        ],
    }
    observation, _, terminated, _, info = env.step(turn)
    assert observation[0]["role"] == "tool"
    assert observation[0]["tool_call_id"] == "c1"
    assert 'text "clicked 1"' in observation[0]["content"]
    assert not terminated
    hermes = '<tool_call>{"name": "click", "arguments": {"element": 3}}</tool_call>'
    observation, reward, terminated, _, info = env.step(hermes)
    assert observation[0]["role"] == "tool"
    assert terminated  # the js check passes: clicked twice
    assert info["success"] is True
    assert reward == 1.0


def test_text_only_env_refuses_tool_calls(make_env: Any) -> None:
    env = make_env(tool=False)
    _, info = env.reset(seed=0, options={"task_id": "press"})
    assert info["tools"] == []
    observation, *_ , info = env.step('<tool_call>{"name": "click", "arguments": {"element": 3}}'
                                      "</tool_call>")
    assert info["invalid_action"] is True
    assert "tools are off" in observation[0]["content"]


def test_the_rules_say_how_to_write_a_tool_call(make_env: Any) -> None:
    rules = make_env(tool_parser="pythonic").reset(seed=0, options={"task_id": "press"})[0][0]
    assert rules["role"] == "system"
    assert rules["content"].endswith(call_format("pythonic"))
    text_only = make_env(tool=False).reset(seed=0, options={"task_id": "press"})[0][0]
    assert "tool" not in text_only["content"]  # it offered "the tool of the same name"


def test_max_steps_truncates(make_env: Any) -> None:
    env = make_env(max_steps=2, invalid_action_penalty=-0.5)
    env.reset(seed=0, options={"task_id": "press"})
    _, reward, _, truncated, _ = env.step("nothing")
    assert (reward, truncated) == (-0.5, False)
    observation, reward, terminated, truncated, info = env.step("click(3)")
    assert truncated
    assert not terminated
    assert info["truncation_reason"] == "max_turns"
    assert info["success"] is False
    assert reward == 0.0
    assert observation[0]["content"].endswith("Out of steps.")


def test_action_choices_are_valid_actions_on_small_pages(make_env: Any) -> None:
    env = make_env(action_choices=10)
    _, info = env.reset(seed=0, options={"task_id": "form"})
    choices = info["action_choices"]
    assert 'select_option(2, "M")' in choices
    assert choices[-1] == 'stop("")'
    assert all(isinstance(parse(c), WebAction) for c in choices)
    _, _, _, _, info = env.step("goto('/long.html')")
    assert "action_choices" not in info  # 400 links: more than 10


def test_stop_ends_the_episode_with_the_sites_verdict(make_env: Any) -> None:
    env = make_env()
    env.reset(seed=0, options={"task_id": "press"})
    _, reward, terminated, truncated, info = env.step('stop("")')
    assert terminated
    assert not truncated
    assert reward == 0.0
    assert info["success"] is False


def test_bad_arguments_raise_config_errors(chromium: str, site_url: str) -> None:
    from agentgym.envs.web.env import WebEnv

    with pytest.raises(ConfigError, match="start_url"):
        WebEnv(start_url="ftp://x", tasks=[{"instruction": "x", "checks": [{"text": "y"}]}])
    with pytest.raises(ConfigError, match="needs tasks"):
        WebEnv(start_url=site_url)
    with pytest.raises(ConfigError, match="invalid_action_penalty"):
        WebEnv(start_url=site_url, tasks=[{"instruction": "x", "checks": [{"text": "y"}]}],
               invalid_action_penalty=1.0)
