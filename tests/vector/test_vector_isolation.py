"""Isolation: an env that raises or hangs fails alone, as data, and works again after a reset."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymnasium.spaces import Box, Discrete
from gymnasium.vector import AutoresetMode

from agentgym.core import user
from agentgym.core.env import AgentEnv
from agentgym.vector import AgentVectorEnv, Transition

from .gymnasium_toys import GenericAgentEnv, space_reset, space_step
from .vector_toys import FaultyEnv, SleepEnv

TIMEOUT = 0.3  # seconds; generous so that healthy envs never reach it


def faulty_batch(fault_on: str, faults: int = 1) -> list[Callable[[], AgentEnv]]:
    """Four envs: 1 raises, 2 hangs (on their first ``faults`` calls of ``fault_on``)."""
    kinds = [None, "raise", "hang", None]
    return [
        lambda f=f: FaultyEnv(f, fault_on=fault_on, faults=faults)  # type: ignore[misc]
        for f in kinds
    ]


def assert_infra_error(t: Transition, kind: str, error: str) -> None:
    assert (t.kind, t.observation, t.reward, t.terminated, t.truncated) == (
        kind,
        (),
        0.0,
        False,
        True,
    )
    assert t.info["infra_error"] is True
    assert t.info["truncation_reason"] == "infra_error"
    assert t.info["error"].startswith(error)


def test_lockstep_step_failures_are_truncations_and_autoreset() -> None:
    venv = AgentVectorEnv(faulty_batch("step"), step_timeout=TIMEOUT, reset_timeout=TIMEOUT)
    venv.reset(seed=0)
    obs, rewards, terminations, truncations, infos = venv.step(["go"] * 4)
    assert obs == ((FaultyEnv.ok(1),), (), (), (FaultyEnv.ok(1),))
    assert rewards.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert truncations.tolist() == [False, True, True, False]
    assert not terminations.any()
    assert infos["_infra_error"].tolist() == [False, True, True, False]
    assert infos["error"][1] == "RuntimeError: step exploded"
    assert infos["error"][2].startswith("DeadlineExceeded: env 2 step did not finish")
    # NEXT_STEP: the failed envs reset now, the others go on; then every env steps normally.
    obs, rewards, *_ = venv.step(["go"] * 4)
    assert obs[1] == obs[2] == (FaultyEnv.ready(),)
    assert rewards.tolist() == [1.0, 0.0, 0.0, 1.0]
    _, rewards, terminations, truncations, infos = venv.step(["go"] * 4)
    assert rewards.tolist() == [1.0] * 4
    assert terminations.tolist() == [True, False, False, True]
    assert "infra_error" not in infos


def test_same_step_mode_reports_the_failure_in_final_info() -> None:
    venv = AgentVectorEnv(
        faulty_batch("step"), step_timeout=TIMEOUT, autoreset_mode=AutoresetMode.SAME_STEP
    )
    venv.reset(seed=0)
    obs, _, _, truncations, infos = venv.step(["go"] * 4)
    assert truncations.tolist() == [False, True, True, False]
    assert obs[1] == obs[2] == (FaultyEnv.ready(),)  # already reset
    assert infos["final_info"]["infra_error"].tolist() == [False, True, True, False]
    assert infos["final_obs"][1] == ()


def test_ragged_step_failures_need_an_explicit_reset() -> None:
    async def main() -> None:
        venv = AgentVectorEnv(faulty_batch("step"), step_timeout=TIMEOUT)
        for i in range(4):
            await venv.areset_one(i)
            venv.submit_step(i, "go")
        got = {t.index: t async for t in venv.transitions()}
        assert not got[0].done
        assert not got[3].done
        assert_infra_error(got[1], "step", "RuntimeError: step exploded")
        assert_infra_error(got[2], "step", "DeadlineExceeded")
        for i in (1, 2):
            with pytest.raises(Exception, match="finished its episode"):
                venv.submit_step(i, "go")
            assert (await venv.areset_one(i)).observation == (FaultyEnv.ready(),)
            assert (await venv.astep_one(i, "go")).observation == (FaultyEnv.ok(1),)

    asyncio.run(main())


def test_failed_reset_rebuilds_the_env_and_retries_once() -> None:
    FaultyEnv.closed_count = 0
    built: list[FaultyEnv] = []

    def make() -> FaultyEnv:  # only the first instance fails its reset
        built.append(FaultyEnv("raise" if not built else None, fault_on="reset"))
        return built[-1]

    venv = AgentVectorEnv([make, FaultyEnv])
    first = venv.envs[0]
    obs, infos = venv.reset(seed=0)
    assert obs == ((FaultyEnv.ready(),),) * 2
    assert "infra_error" not in infos
    assert venv.envs[0] is built[1] is not first
    assert FaultyEnv.closed_count == 1  # the broken instance was closed


@pytest.mark.parametrize("fault", ["raise", "hang"])
def test_reset_failing_twice_is_reported_and_retried_on_the_next_step(fault: str) -> None:
    # Every instance fails its first reset, so the rebuilt one fails too; it works the next time.
    venv = AgentVectorEnv(
        [lambda: FaultyEnv(fault, fault_on="reset"), FaultyEnv], reset_timeout=TIMEOUT
    )
    obs, infos = venv.reset(seed=0)
    assert obs == ((), (FaultyEnv.ready(),))
    assert infos["_infra_error"].tolist() == [True, False]
    obs, rewards, _, truncations, _ = venv.step(["go", "go"])
    assert obs == ((FaultyEnv.ready(),), (FaultyEnv.ok(1),))  # env 0 was reset, not stepped
    assert (rewards.tolist(), truncations.tolist()) == ([0.0, 1.0], [False, False])
    assert venv.step(["go", "go"])[0] == ((FaultyEnv.ok(1),), (FaultyEnv.ok(2),))


def test_disabled_mode_repeats_a_failed_reset_until_reset_again() -> None:
    venv = AgentVectorEnv(
        [lambda: FaultyEnv("raise", fault_on="reset"), FaultyEnv],
        autoreset_mode=AutoresetMode.DISABLED,
    )
    venv.reset(seed=0)
    _, _, _, truncations, infos = venv.step(["go", "go"])
    assert truncations.tolist() == [True, False]
    assert infos["_infra_error"].tolist() == [True, False]
    obs, _ = venv.reset(options={"reset_mask": truncations})
    assert obs[0] == (FaultyEnv.ready(),)
    assert venv.step(["go", "go"])[1].tolist() == [1.0, 1.0]


def test_a_hanging_ragged_reset_does_not_hold_up_the_others() -> None:
    async def main() -> list[Transition]:
        venv = AgentVectorEnv(
            [lambda: FaultyEnv("hang", fault_on="reset", faults=2), FaultyEnv, FaultyEnv],
            reset_timeout=TIMEOUT,
        )
        for i in range(3):
            venv.submit_reset(i)
        return [t async for t in venv.transitions()]

    done = asyncio.run(main())
    assert [t.index for t in done][-1] == 0  # the healthy envs came back first
    assert_infra_error(done[-1], "reset", "DeadlineExceeded: env 0 reset")
    assert np.all([not t.infra_error for t in done[:2]])


def test_waiting_for_max_concurrency_does_not_count_against_the_deadline() -> None:
    venv = AgentVectorEnv([lambda: SleepEnv(0.1)] * 8, max_concurrency=1, step_timeout=0.5)
    venv.reset(seed=0)
    _, _, _, truncations, infos = venv.step(["go"] * 8)  # 0.8 s in all, 0.1 s each
    assert not truncations.any()
    assert "infra_error" not in infos


def test_an_env_rebuilt_after_a_failed_reset_is_closed_exactly_once() -> None:
    FaultyEnv.closed_count = 0
    venv = AgentVectorEnv([lambda: FaultyEnv("raise", fault_on="reset")])
    venv.reset(seed=0)  # fails, rebuilds (closing the old env), fails again
    first = FaultyEnv.closed_count
    venv.close()
    venv.close()
    assert first >= 1
    assert FaultyEnv.closed_count == first + 1  # the rebuilt env, once


def test_a_failed_env_shows_zeros_in_a_batch_of_arrays() -> None:
    """Under a Gymnasium array space the batch is a numpy array (as ``SyncVectorEnv``'s): a failed
    env's place holds zeros, the others their observations."""

    class Explodes(GenericAgentEnv):
        def step(self, action: Any) -> Any:
            if self.count == 0 and self.max_count == 1:
                self.count += 1
                raise RuntimeError("step exploded")
            return super().step(action)

    def make() -> GenericAgentEnv:
        return Explodes(space_reset, space_step, Box(1.0, 2.0, (2,)), Discrete(3), space_seed=0)

    venv = AgentVectorEnv([make] * 3)
    venv.set_attr("max_count", [3, 1, 3])
    obs, _ = venv.reset(seed=0)
    assert isinstance(obs, np.ndarray)
    assert obs.shape == (3, 2)
    assert (obs >= 1.0).all()
    obs, _, _, truncations, infos = venv.step(np.array([0, 1, 2]))
    assert truncations.tolist() == [False, True, False]
    assert infos["_infra_error"].tolist() == [False, True, False]
    assert obs[1].tolist() == [0.0, 0.0]
    assert (obs[[0, 2]] >= 1.0).all()


def test_an_env_reporting_its_own_infra_error_keeps_its_observation() -> None:
    def reset(env: Any, seed: int | None, options: Any) -> tuple[Any, dict[str, Any]]:
        return (user("ready"),), {}

    def step(env: Any, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        info = {"infra_error": True, "error": "server gone", "truncation_reason": "infra_error"}
        return (user("the server went away"),), 0.0, False, True, info

    venv = AgentVectorEnv([lambda: GenericAgentEnv(reset, step)] * 2)
    venv.reset(seed=0)
    obs, *_, infos = venv.step(["a", "b"])
    assert obs == ((user("the server went away"),),) * 2
    assert infos["error"].tolist() == ["server gone"] * 2
