"""Groups for GRPO: the envs of a group play the same task in each of their episodes."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from agentgym.error import ConfigError
from agentgym.vector import AgentVectorEnv

from .vector_toys import CountEnv

GROUP = 4


def seeds_of(venv: AgentVectorEnv) -> list[list[int | None]]:
    return [list(env.seeds) for env in venv.envs]  # type: ignore[attr-defined]


def assert_groups_share_tasks(seeds: list[list[int | None]], *, min_episodes: int) -> None:
    """Episode n of every member of a group has the same (non-None) seed; groups differ."""
    firsts = []
    for start in range(0, len(seeds), GROUP):
        members = seeds[start : start + GROUP]
        shared = min(len(m) for m in members)
        assert shared >= min_episodes
        for n in range(shared):
            episode_seeds = {m[n] for m in members}
            assert len(episode_seeds) == 1, f"group {start // GROUP} episode {n}: {episode_seeds}"
            assert None not in episode_seeds
        firsts.append(members[0][:shared])
    assert len({tuple(f) for f in firsts}) == len(firsts), "two groups played the same tasks"


def play(venv: AgentVectorEnv, steps: int) -> None:
    """Members of a group stop at different times: env i says "stop" every (i % GROUP + 1) steps."""
    for t in range(1, steps + 1):
        actions = ["stop" if t % (i % GROUP + 1) == 0 else "go" for i in range(venv.num_envs)]
        _, _, terminations, truncations, _ = venv.step(actions)
        if venv.autoreset_mode is AutoresetMode.DISABLED and (terminations | truncations).any():
            venv.reset(options={"reset_mask": terminations | truncations})


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_groups_share_tasks_across_resets_and_autoresets(mode: AutoresetMode) -> None:
    venv = AgentVectorEnv([CountEnv] * 12, group_size=GROUP, autoreset_mode=mode)
    venv.reset(seed=100)
    assert [s[0] for s in seeds_of(venv)] == [100] * 4 + [101] * 4 + [102] * 4
    play(venv, 24)
    lengths = [len(s) for s in seeds_of(venv)]
    assert len(set(lengths[:GROUP])) > 1  # members finished at different times
    assert_groups_share_tasks(seeds_of(venv), min_episodes=3)
    again = AgentVectorEnv([CountEnv] * 12, group_size=GROUP, autoreset_mode=mode)
    again.reset(seed=100)
    play(again, 24)
    assert seeds_of(again) == seeds_of(venv)  # deterministic given the seed


def test_seedless_reset_draws_one_random_task_per_group() -> None:
    venv = AgentVectorEnv([CountEnv] * 8, group_size=GROUP)
    venv.reset()
    venv.reset()
    play(venv, 10)
    seeds = seeds_of(venv)
    assert_groups_share_tasks(seeds, min_episodes=3)
    assert seeds[0][0] != seeds[0][1]  # a new reset(seed=None) is a new task


def test_group_seed_list_must_agree_within_groups() -> None:
    venv = AgentVectorEnv([CountEnv] * 4, group_size=2)
    venv.reset(seed=[7, 7, 9, 9])
    assert [s[0] for s in seeds_of(venv)] == [7, 7, 9, 9]
    with pytest.raises(ConfigError, match="share a seed"):
        venv.reset(seed=[7, 8, 9, 9])


def test_ragged_group_resets_share_tasks() -> None:
    async def main() -> AgentVectorEnv:
        venv = AgentVectorEnv([CountEnv] * 8, group_size=GROUP)
        for k in range(2):
            venv.submit_reset_group(k)
        # Each member stops after a different number of steps and resets by itself.
        steps = [0] * 8
        episodes = [1] * 8
        async for t in venv.transitions():
            i = t.index
            if t.done and episodes[i] < 3:
                episodes[i] += 1
                venv.submit_reset(i)
            elif not t.done:
                steps[i] += 1
                venv.submit_step(i, "stop" if steps[i] % (i % GROUP + 1) == 0 else "go")
        return venv

    venv = asyncio.run(main())
    seeds = seeds_of(venv)
    assert all(len(s) == 3 for s in seeds)
    assert_groups_share_tasks(seeds, min_episodes=3)


def test_submit_reset_group_with_a_seed_and_realignment() -> None:
    venv = AgentVectorEnv([CountEnv] * 4, group_size=2)
    venv.submit_reset_group(1, seed=5)
    assert sorted(venv.recv().index for _ in range(2)) == [2, 3]
    venv.reset_one(2)  # env 2 moves on to the group's next task alone...
    venv.submit_reset_group(1)  # ...a group reset brings both to one task past the furthest
    for _ in range(2):
        venv.recv()
    seeds = seeds_of(venv)
    assert seeds[2][0] == seeds[3][0] == 5
    assert seeds[2][-1] == seeds[3][-1]
    assert seeds[2][-1] not in (5, seeds[2][1])
    with pytest.raises(ConfigError, match="group"):
        venv.submit_reset_group(2)


def test_groups_in_the_step_infos() -> None:
    venv = AgentVectorEnv([CountEnv] * 4, group_size=2)
    obs, infos = venv.reset(seed=3)
    assert obs[0] == obs[1]
    assert obs[2] == obs[3]
    assert obs[0] != obs[2]
    np.testing.assert_array_equal(infos["task"][:2], infos["task"][0])
