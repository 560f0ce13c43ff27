"""Helpers of the MiniWoB tests (the ``chromium`` fixture is tests/envs/web's): the episode's
instruction, and an episode played by the scripted solution."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest


@pytest.fixture
def helpers() -> Any:
    """``helpers.play_oracle`` and ``helpers.instruction_of``.

    A namespace of the functions, not ``sys.modules[__name__]``: every conftest.py of a folder
    without ``__init__.py`` is imported as ``conftest``, so that name holds whichever came last.
    """
    return SimpleNamespace(play_oracle=play_oracle, instruction_of=instruction_of)


def instruction_of(env: Any, info: dict[str, Any]) -> str:
    """The episode's instruction (the page's utterance)."""
    text = getattr(env.unwrapped, "instruction", None)
    return str(text if text is not None else info["instruction"])


def play_oracle(env: Any, seed: int, task_id: str, max_steps: int = 8) -> tuple[float, dict]:
    """One episode of ``task_id`` played by the scripted solution: (return, last info)."""
    from agentgym.envs.web.miniwob.oracle import solve

    _, info = env.reset(seed=seed, options={"task_id": task_id})
    instruction = instruction_of(env, info)
    history: list[str] = []
    total = 0.0
    for _ in range(max_steps):
        action = solve(task_id, instruction, env.unwrapped.nodes, history)
        history.append(action)
        _, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        if terminated or truncated:
            break
    info["history"] = history
    return total, info
