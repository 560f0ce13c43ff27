"""Helpers of the SWE env tests: make one tool call, or apply an instance's gold patch."""

from __future__ import annotations

import json
from typing import Any

from agentgym.envs.swe import as_action


def step(env: Any, *calls: tuple[str, dict[str, Any]]) -> tuple[Any, ...]:
    """``env.step`` with one assistant turn making ``calls`` (name, arguments) in order."""
    return env.step(as_action([{"name": name, "arguments": args} for name, args in calls]))


def call(env: Any, name: str, **arguments: Any) -> str:
    """The answer of one tool call (the episode must go on)."""
    obs, reward, terminated, truncated, _ = step(env, (name, arguments))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert len(obs) == 1
    assert obs[0]["role"] == "tool"
    assert obs[0]["name"] == name
    return str(obs[0]["content"])


def submit(env: Any) -> tuple[float, dict[str, Any]]:
    obs, reward, terminated, truncated, info = step(env, ("submit", {}))
    assert terminated
    assert not truncated
    assert obs[-1]["role"] == "user"
    return float(reward), info


def replay_gold(env: Any, record: dict[str, Any]) -> float:
    """Step the assistant messages of an ``agentgym swe export-sft`` record through ``env``;
    each answer must be the recorded one (a test run's timing aside); returns the reward."""
    messages = record["messages"]
    observation, info = env.reset(options={"task_id": record["task_id"]})
    assert list(observation) == messages[: len(observation)]
    assert json.loads(record["tools"]) == info["tools"]
    reward, at = 0.0, len(observation)
    while at < len(messages):
        turn = messages[at]
        assert turn["role"] == "assistant"
        observation, reward, terminated, _, info = env.step(turn)
        answers = [m for m in observation if m["role"] == "tool"]
        recorded = messages[at + 1 : at + 1 + len(answers)]
        if terminated:
            assert at == len(messages) - 1  # the file ends with the submit call
            break
        for got, want in zip(answers, recorded, strict=True):
            assert (got["tool_call_id"], got["name"]) == (want["tool_call_id"], want["name"])
            if got["name"] == "run_tests":
                assert got["content"].endswith("(exit code 0)")
            else:
                assert got["content"] == want["content"]
        at += 1 + len(answers)
    assert info["resolved"] is True
    return float(reward)
