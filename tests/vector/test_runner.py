"""Whose failure a failed env call was (``error_kind``, ``error_at``), and an env's own
exception logged once with its traceback however often it recurs."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentgym.core import Observation, StepResult, user
from agentgym.core.aio import run_sync
from agentgym.core.env import AgentEnv
from agentgym.core.errors import EnvStateError
from agentgym.core.info import error_kind, problems
from agentgym.vector import AgentVectorEnv


class _Env(AgentEnv):
    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        return (user("go"),), {"tools": []}


class DividingEnv(_Env):
    async def astep(self, action: Any) -> StepResult:
        return (user(str(1 / 0)),), 0.0, True, False, {}


class AlwaysDividingEnv(DividingEnv):
    """Its own class: each failure is logged once per process, by env class."""


class UnreachableEnv(_Env):
    async def astep(self, action: Any) -> StepResult:
        raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")


def test_an_env_exception_is_the_envs_a_lost_connection_is_infra() -> None:
    venv = AgentVectorEnv([DividingEnv, UnreachableEnv])
    venv.reset(seed=0)
    *_, infos = venv.step(["a", "b"])
    venv.close()
    assert infos["infra_error"].tolist() == [True, True]
    assert infos["error_kind"].tolist() == ["env", "infra"]
    assert infos["error_at"].tolist() == ["DividingEnv.step", "UnreachableEnv.step"]
    assert infos["error"][0] == "ZeroDivisionError: division by zero"
    info = {key: str(infos[key][0]) for key in ("error", "error_kind", "error_at")}
    info["infra_error"] = True
    assert error_kind(info) == "env"
    assert problems(info, "step") == []
    assert error_kind({"infra_error": True, "error": "server gone"}) == "infra"  # an env's own
    assert error_kind({}) is None
    assert problems({"infra_error": True, "error_kind": "bug"}, "step") == [
        "error_kind 'bug' is not one of ('infra', 'env')"
    ]


def test_an_env_that_always_raises_is_logged_once_with_its_traceback(caplog) -> None:
    venv = AgentVectorEnv([AlwaysDividingEnv] * 4)
    venv.reset(seed=0)
    with caplog.at_level(logging.DEBUG, logger="agentgym.vector"):
        for _ in range(4):  # fail, reset, fail, reset: 8 failures
            venv.step(["a"] * 4)
    venv.close()
    failures = [r for r in caplog.records if "step failed" in r.getMessage()]
    assert len(failures) == 8
    shown = [r for r in failures if r.levelno == logging.WARNING]
    assert len(shown) == 1
    assert shown[0].exc_info is not None
    assert shown[0].exc_info[0] is ZeroDivisionError
    assert "raised by the env's own code" in shown[0].getMessage()
    assert all(r.levelno == logging.DEBUG for r in failures if r is not shown[0])


class NeverResettingEnv(DividingEnv):
    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")


def test_stepping_an_env_whose_reset_failed_says_so() -> None:
    venv = AgentVectorEnv([NeverResettingEnv])
    try:
        failed = venv.reset_one(0)  # fails, is rebuilt, fails again: an infra transition
        assert failed.truncated
        assert failed.info["infra_error"] is True
        assert failed.info["error_at"] == "NeverResettingEnv.reset"
        with pytest.raises(EnvStateError, match="failed its last reset"):
            run_sync(venv.astep_one(0, "go"))
    finally:
        venv.close()
