"""What ``agentgym serve-env`` does when the env it serves raises: the client gets an error answer,
the server goes on, and each distinct error is logged once with its traceback and request.

The server runs in this process (``ServedEnv`` directly, and the app under Starlette's test
client); ``tests/envs/remote/test_serve_env.py`` starts real servers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
from fastapi.testclient import TestClient

from agentgym.core.env import AgentEnv
from agentgym.core.types import user
from agentgym.vector.serve_env import (
    AgentAction,
    EnvErrors,
    ServedEnv,
    ServedEnvError,
    ServeOptions,
    build_app,
)

LOGGER = "agentgym.vector.serve_env"


class RaisingEnv(AgentEnv):
    """A bug of the env's own on every step; ``"other"`` is a second, distinct one."""

    async def areset(self, *, seed: int | None = None, options: Any = None) -> Any:
        await super().areset(seed=seed, options=options)
        return (user("go"),), {"tools": []}

    async def astep(self, action: Any) -> Any:
        raise KeyError("no such move" if action == "other" else "the env's own bug")


@pytest.fixture(scope="module")
def raising_id() -> Iterator[str]:
    env_id = "servetest/Raising-v0"  # not agentgym/: the contract test counts those
    gym.register(env_id, entry_point=RaisingEnv)
    yield env_id
    del gym.registry[env_id]


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def test_each_distinct_env_error_is_logged_once_with_traceback_and_request(
    raising_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    options = ServeOptions(raising_id, idle_timeout=None)
    errors = EnvErrors(raising_id)
    sessions = [ServedEnv(options, errors) for _ in range(2)]

    async def play() -> None:
        for served in sessions:
            for _ in range(3):
                await served.reset_async(seed=0)
                with pytest.raises(ServedEnvError, match="KeyError"):
                    await served.step_async(AgentAction(message="up"))
        await sessions[1].reset_async(seed=1)
        with pytest.raises(ServedEnvError, match="no such move"):
            await sessions[1].step_async(AgentAction(message="other"))

    with caplog.at_level(logging.ERROR, logger=LOGGER):
        try:
            asyncio.run(play())
        finally:
            for served in sessions:
                served.close()
    records = _records(caplog)
    assert len(records) == 2  # 7 failures of 2 kinds, over 2 sessions
    first = records[0].getMessage()
    assert first.startswith(f'{raising_id} raised KeyError: "the env\'s own bug" on step 1 of ')
    assert "action 'up'" in first
    assert records[0].exc_info is not None
    assert records[0].exc_info[0] is KeyError
    assert "in astep" in caplog.text  # the traceback reaches the env's own frame
    assert "action 'other'" in records[1].getMessage()
    assert errors.counts == {
        'KeyError: "the env\'s own bug"': 6,
        "KeyError: 'no such move'": 1,
    }


def test_the_client_gets_its_error_and_the_server_goes_on(
    raising_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    app, _ = build_app(ServeOptions(raising_id, idle_timeout=None))
    with caplog.at_level(logging.ERROR, logger=LOGGER), TestClient(app) as client:
        with client.websocket_connect("/ws") as ws:
            for _ in range(2):
                ws.send_json({"type": "reset", "data": {"seed": 0}})
                assert ws.receive_json()["type"] == "observation"
                ws.send_json({"type": "step", "data": {"message": "up"}})
                answer = ws.receive_json()
                assert answer["type"] == "error"
                assert answer["data"]["message"] == 'KeyError: "the env\'s own bug"'
        assert client.get("/status").json()["env_errors"] == 2
    assert len(_records(caplog)) == 1
