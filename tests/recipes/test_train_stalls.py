"""``agentgym train`` whose every episode fails stops after a few steps, non-zero, naming the
cause: a Remote-v0 whose server is down, and an env whose step always raises (its traceback
shown once). Both used to spin without end (pytest's timeout now ends such a regression)."""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentgym
from agentgym.cli import main
from agentgym.core import Observation, StepResult, user
from agentgym.core.env import AgentEnv
from agentgym.registry import _ENVS

ARGS = [
    "--algo", "grpo", "--group-size", "4", "--batch-size", "8", "--max-turns", "2",
    "--eval-episodes", "0", "--no-progress", "--steps", "2",
]  # fmt: skip


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_a_dead_env_server_stops_agentgym_train_naming_it(tmp_path, capsys):
    url = f"http://127.0.0.1:{_closed_port()}"
    out = tmp_path / "run"
    args = ["--env", "agentgym/Remote-v0", "--env-kwargs", f"url={url}", *ARGS]
    status = main(["train", *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 1
    assert "3 training steps in a row had no episode to train on" in err
    assert re.search(r"24 episodes: .*ConnectionRefusedError.*\(infra\)", err)
    assert "Fix: infra: bring up what the env depends on" in err
    assert "Traceback" not in err
    rows = _rows(out)
    assert [r["empty_steps"] for r in rows] == [1, 2, 3]
    assert all(r["dropped/infra"] == 8 and r["step"] == 0 for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert "ConnectionRefusedError" in summary["error"]
    assert summary["guards"]["stopped"]  # the infra-error guard saw the empty steps


class DividingEnv(AgentEnv):
    """A tiny env whose step has a bug."""

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        return (user("Say anything."),), {"tools": []}

    async def astep(self, action: Any) -> StepResult:
        return (user(f"{1 / 0}"),), 1.0, True, False, {}


@pytest.fixture
def dividing_env() -> Iterator[str]:
    env_id = "stalls/Dividing-v0"
    agentgym.register(env_id, DividingEnv)
    yield env_id
    gym.registry.pop(env_id, None)
    _ENVS.pop(env_id, None)


def test_an_env_that_always_raises_stops_the_run_its_traceback_shown_once(
    dividing_env, tmp_path, capsys, caplog
):
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="agentgym.vector"):
        status = main(["train", "--env", dividing_env, *ARGS, "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 1
    cause = "DividingEnv.step raised ZeroDivisionError: division by zero (env bug)"
    assert f"24 episodes: {cause}" in err
    assert "Fix: env bug: fix the env's code" in err
    traces = [r for r in caplog.records if r.exc_info is not None]
    assert len(traces) == 1
    assert traces[0].exc_info[0] is ZeroDivisionError
    rows = _rows(out)
    assert [r["empty_steps"] for r in rows] == [1, 2, 3]
    assert all(r["dropped/env"] == 8 and "dropped/infra" not in r for r in rows)
