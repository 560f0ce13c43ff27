"""AgentVectorEnv's ragged API: per-env submission, completion order, explicit resets."""

from __future__ import annotations

import asyncio

import pytest

from agentgym.error import ConfigError, EnvStateError
from agentgym.vector import AgentVectorEnv, Transition

from .vector_toys import CountEnv, SleepEnv

DELAYS = [0.4, 0.1, 0.3, 0.2]  # seconds; shortest first is env 1, 3, 2, 0


def sleepers(delays: list[float], **kwargs: object) -> AgentVectorEnv:
    return AgentVectorEnv([lambda d=d: SleepEnv(d) for d in delays], **kwargs)  # type: ignore[misc]


def test_transitions_come_back_in_completion_order() -> None:
    async def main() -> list[int]:
        venv = sleepers(DELAYS)
        for i in range(venv.num_envs):
            venv.submit_reset(i)
        assert sorted([(await venv.arecv()).index for _ in range(4)]) == [0, 1, 2, 3]
        for i in range(venv.num_envs):
            venv.submit_step(i, "go")
        assert venv.pending == 4
        return [t.index async for t in venv.transitions()]

    assert asyncio.run(main()) == [1, 3, 2, 0]


def test_a_finished_step_can_be_followed_at_once() -> None:
    """An env is stepped again as soon as its own transition arrives, while others still run."""

    async def main() -> list[tuple[int, int]]:
        venv = sleepers([0.05, 0.5])
        venv.submit_reset(0)
        venv.submit_reset(1)
        order = []
        async for t in venv.transitions():
            steps = venv.envs[t.index].steps  # type: ignore[attr-defined]
            order.append((t.index, steps))
            if (t.index == 0 and steps < 3) or (t.index == 1 and t.kind == "reset"):
                venv.submit_step(t.index, "go")
        return order

    order = asyncio.run(main())
    assert order[-1] == (1, 1)  # the slow env's only step ends last
    assert [o for o in order if o[0] == 0] == [(0, 0), (0, 1), (0, 2), (0, 3)]


def test_transition_fields_and_explicit_resets() -> None:
    async def main() -> None:
        venv = AgentVectorEnv([CountEnv] * 2)
        first = await venv.areset_one(0, seed=4)
        assert first == Transition(0, "reset", first.observation, 0.0, False, False, first.info)
        assert first.info["task"] >= 0
        stepped = await venv.astep_one(0, "stop")
        assert (stepped.kind, stepped.terminated, stepped.done) == ("step", True, True)
        with pytest.raises(EnvStateError, match="finished its episode"):
            await venv.astep_one(0, "again")  # no autoreset in the ragged API
        with pytest.raises(EnvStateError, match="never reset"):
            venv.submit_step(1, "x")
        again = await venv.areset_one(0, seed=4)
        assert again.observation == first.observation  # same seed, same task
        assert (await venv.astep_one(0, "ok")).kind == "step"

    asyncio.run(main())


def test_busy_envs_and_empty_inbox_raise() -> None:
    async def main() -> None:
        venv = sleepers([0.05, 0.05])
        venv.submit_reset(0)
        with pytest.raises(EnvStateError, match="busy"):
            venv.submit_reset(0)
        with pytest.raises(EnvStateError, match="busy"):
            await venv.areset()  # lockstep needs every env idle
        await venv.arecv()
        with pytest.raises(EnvStateError, match="nothing to receive"):
            await venv.arecv()
        with pytest.raises(ConfigError, match="index"):
            venv.submit_reset(2)
        with pytest.raises(ConfigError, match="seed"):
            venv.submit_reset(1, seed=-3)
        venv.submit_reset(1)  # a rejected call left the env usable
        await venv.arecv()

    asyncio.run(main())


def test_sync_wrappers() -> None:
    venv = AgentVectorEnv([CountEnv] * 3)
    for i in range(3):
        venv.submit_reset(i, seed=i)  # no loop runs: the work starts in recv()
    assert sorted(venv.recv().index for _ in range(3)) == [0, 1, 2]
    assert venv.step_one(2, "stop").terminated
    assert venv.reset_one(2).kind == "reset"
    venv.submit_step(1, "x")
    assert venv.recv().index == 1
    assert venv.pending == 0


def test_ragged_and_lockstep_share_the_envs() -> None:
    venv = AgentVectorEnv([CountEnv] * 2)
    venv.reset(seed=0)
    assert venv.step_one(0, "stop").terminated
    obs, rewards, *_ = venv.step(["a", "b"])
    assert rewards[0] == 0.0  # NEXT_STEP: env 0 was finished, so this step reset it
    assert obs[0][0]["content"].startswith("task")


def test_ragged_api_respects_max_concurrency() -> None:
    SleepEnv.reset_counters()

    async def main() -> None:
        venv = AgentVectorEnv([lambda: SleepEnv(0.01)] * 32, max_concurrency=4)
        for i in range(32):
            venv.submit_reset(i)
        async for t in venv.transitions():
            if t.kind == "reset":
                venv.submit_step(t.index, "go")

    asyncio.run(main())
    assert SleepEnv.most_inside == 4


def test_close_cancels_pending_work() -> None:
    async def main() -> None:
        venv = sleepers([10.0, 10.0])
        venv.submit_reset(0)
        venv.submit_reset(1)
        await venv.arecv()
        venv.submit_step(0, "go")
        await asyncio.sleep(0.01)
        venv.close()
        assert venv.pending == 0

    asyncio.run(main())


def test_work_cancelled_with_its_loop_leaves_the_env_usable() -> None:
    venv = sleepers([10.0])

    async def submit_and_leave() -> None:
        await venv.areset_one(0)
        venv.submit_step(0, "go")  # asyncio.run cancels it on exit

    asyncio.run(submit_and_leave())
    assert venv.pending == 0
    with pytest.raises(EnvStateError, match="nothing to receive"):
        venv.recv()
    assert venv.reset_one(0).kind == "reset"
