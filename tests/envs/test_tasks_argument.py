"""One name for the task data of every family, ``tasks=``; the old names (``data=`` of Math and
Code, ``instances=`` of SWE) still work, with a deprecation warning, and not beside the new one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from agentgym.core.errors import AgentGymDeprecationWarning, ConfigError
from agentgym.registry.lookup import env_arguments

MATH_ROW = {"question": "What is 2 + 3?", "answer": "5"}
CODE_ROW = {
    "task_id": "mine/add",
    "prompt": 'def add(a, b):\n    """Return a + b."""\n',
    "entry_point": "add",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
}


def _jsonl(path: Path, row: dict[str, Any]) -> str:
    path.write_text(json.dumps(row) + "\n")
    return str(path)


def _first_task(env: Any) -> Any:
    return env.unwrapped.tasks[0]


@pytest.mark.parametrize(
    ("env_id", "old", "row", "field", "value"),
    [
        ("agentgym/Math-v0", "data", MATH_ROW, "answer", "5"),
        ("agentgym/Code-v0", "data", CODE_ROW, "task_id", "mine/add"),
    ],
)
def test_tasks_and_the_old_name_read_the_same_file(
    tmp_path: Path, env_id: str, old: str, row: dict[str, Any], field: str, value: str
) -> None:
    path = _jsonl(tmp_path / "tasks.jsonl", row)
    new = gym.make(env_id, tasks=path)
    assert getattr(_first_task(new), field) == value
    with pytest.warns(AgentGymDeprecationWarning, match=f"{old}= is deprecated.*use tasks="):
        aliased = gym.make(env_id, **{old: path})
    assert getattr(_first_task(aliased), field) == value
    new.close()
    aliased.close()


def test_swe_instances_is_the_old_name_of_tasks() -> None:
    from agentgym.envs.swe import load_instances

    records = load_instances()[:1]
    with pytest.warns(AgentGymDeprecationWarning, match="instances= is deprecated"):
        env = gym.make("agentgym/SWE-v0", instances=records, sandbox="local")
    assert [i.instance_id for i in env.unwrapped.instances] == [records[0]["instance_id"]]
    env.close()


@pytest.mark.parametrize(
    ("env_id", "old"),
    [("agentgym/Math-v0", "data"), ("agentgym/Code-v0", "data"), ("agentgym/SWE-v0", "instances")],
)
def test_both_names_at_once_are_refused(tmp_path: Path, env_id: str, old: str) -> None:
    with pytest.raises(ConfigError, match=f"{old}=.*is the old name of tasks"):
        gym.make(env_id, tasks="a.jsonl", **{old: "b.jsonl"})


@pytest.mark.parametrize(
    "env_id",
    [
        "agentgym/Code-v0",
        "agentgym/Math-v0",
        "agentgym/SWE-v0",
        "agentgym/MCP-v0",
        "agentgym/Web-v0",
    ],
)
def test_every_family_that_reads_task_data_calls_it_tasks(env_id: str) -> None:
    valid = env_arguments(env_id)
    assert valid is not None
    assert "tasks" in valid
