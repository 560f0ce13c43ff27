"""``ProcessEnv``: an env in a child process; hangs, crashes and errors stay that env's own."""

from __future__ import annotations

import os
import time
from typing import Any

import gymnasium as gym
import pytest

import agentgym
from agentgym.core import AgentEnv, Observation, StepResult, user
from agentgym.error import ConfigError, EnvStateError
from agentgym.vector import AgentVectorEnv
from agentgym.vector.process import ProcessEnv

ENV_ID = "testproc/Pid-v0"


class PidEnv(AgentEnv):
    """Gymnasium style; the action says whether to answer, hang, die or raise."""

    def __init__(self, greeting: str = "hi") -> None:
        super().__init__()
        self.greeting = greeting

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        task = int(self.np_random.integers(1000))
        return (user(f"{self.greeting} {task}"),), {"tools": [], "pid": os.getpid()}

    def step(self, action: Any) -> StepResult:
        if action == "hang":
            time.sleep(120)
        elif action == "die":
            os._exit(3)
        elif action == "raise":
            raise RuntimeError("boom")
        return (user("ok"),), 1.0, True, False, {"success": True, "pid": os.getpid()}


@pytest.fixture(scope="module", autouse=True)
def registered() -> Any:
    agentgym.register(ENV_ID, PidEnv)
    yield
    gym.registry.pop(ENV_ID)
    agentgym.registry._ENVS.pop(ENV_ID)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_env_runs_in_a_child_and_close_ends_it() -> None:
    env = ProcessEnv(ENV_ID, {"greeting": "hello"})
    obs, info = env.reset(seed=4)
    assert obs == gym.make(ENV_ID, greeting="hello").reset(seed=4)[0]  # same seeding as in-process
    child = info["pid"]
    assert child not in (os.getpid(), None)
    assert child == env.pid
    assert env.step("x")[4]["pid"] == child
    env.close()
    time.sleep(0.2)
    assert not _alive(child)
    with pytest.raises(EnvStateError):
        env.reset()


def test_hangs_crashes_and_errors_are_each_envs_own_infra_error() -> None:
    venv = AgentVectorEnv(
        [lambda: ProcessEnv(ENV_ID)] * 4, step_timeout=2.0, autoreset_mode="SameStep"
    )
    _, infos = venv.reset(seed=0)
    pids = list(infos["pid"])
    _, rewards, _, truncated, infos = venv.step(["hang", "ok", "die", "raise"])
    assert rewards.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert truncated.tolist() == [True, False, True, True]
    errors = infos["final_info"]["error"]
    assert "did not finish" in errors[0]
    assert "died" in errors[2]
    assert "RuntimeError: boom" in errors[3]
    time.sleep(0.2)
    assert not _alive(pids[0])  # the hung child was killed, not left behind
    assert not _alive(pids[2])
    new_pids = list(infos["pid"])  # SAME_STEP reset: fresh children where the old ones ended
    assert new_pids[1] == pids[1]
    assert new_pids[0] not in pids
    assert new_pids[2] not in pids
    venv.close()
    time.sleep(0.2)
    assert not any(_alive(p) for p in new_pids)


class AsksForProcess(PidEnv):
    worker = "process"


@pytest.mark.parametrize(
    ("entry_point", "workers", "in_child"),
    [(AsksForProcess, None, True), (PidEnv, None, False), (PidEnv, "process", True),
     (AsksForProcess, "thread", False)],
)  # fmt: skip
def test_the_env_class_or_the_caller_picks_processes(
    entry_point: type, workers: str | None, in_child: bool
) -> None:
    agentgym.register("testproc/Picks-v0", entry_point)
    try:
        venv = gym.make_vec(
            "testproc/Picks-v0", num_envs=2, vectorization_mode="vector_entry_point",
            workers=workers,
        )  # fmt: skip
        _, infos = venv.reset(seed=0)
        venv.close()
    finally:
        gym.registry.pop("testproc/Picks-v0")
        agentgym.registry._ENVS.pop("testproc/Picks-v0")
    assert (infos["pid"][0] != os.getpid()) == in_child
    assert len(set(infos["pid"])) == (2 if in_child else 1)


def test_an_unknown_workers_value_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="'thread', 'process' or 'ray'"):
        AgentVectorEnv.from_id(ENV_ID, 2, workers="ray-someday")
