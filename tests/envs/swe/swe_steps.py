"""Helpers of the SWE env tests: make one tool call, or apply an instance's gold patch."""

from __future__ import annotations

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
