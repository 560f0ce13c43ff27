"""64 concurrent MiniWoB episodes through ``AgentVectorEnv``: 1,000 episodes end with no Chromium
process left behind and a memory footprint that stops growing (figures printed).

One task (click-button), so that consecutive episodes of an env restart in its loaded page as
training does; every env still opens a fresh context at its first episode and every
``reuse_page`` episodes, and random clicks end many episodes with a wrong button."""

from __future__ import annotations

import contextlib
import random

import psutil
import pytest

from agentgym.envs.web.miniwob import MiniWoBEnv
from agentgym.vector import AgentVectorEnv

NUM_ENVS = 64
EPISODES = 1000


def _chromium_processes() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "chrom" in child.name().lower():
                found.append(child)
        except psutil.Error:
            pass
    return found


def _rss_mb() -> float:
    total = psutil.Process().memory_info().rss
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
    return total / 2**20


def _click_something(env: MiniWoBEnv, rng: random.Random) -> str:
    ids = [n.id for n in env.nodes if n.clickable]
    return f"click({rng.choice(ids)})" if ids else 'stop("")'


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_thousand_episodes_at_64_concurrent_leak_nothing(chromium: str) -> None:
    assert not _chromium_processes()
    rng = random.Random(0)
    # A generous deadline: the verdict (no leak, bounded memory) must not depend on the load.
    make = lambda: MiniWoBEnv(task="click-button", max_steps=3, step_timeout=300.0)  # noqa: E731
    venv = AgentVectorEnv([make for _ in range(NUM_ENVS)])
    ended = infra = 0
    rss: list[float] = []
    try:
        venv.reset(seed=0)
        while ended < EPISODES:
            actions = [_click_something(env, rng) for env in venv.envs]
            _, _, terminated, truncated, infos = venv.step(actions)
            done = terminated | truncated
            ended += int(done.sum())
            infra += int(sum(bool(x) for x in infos.get("infra_error", [])))
            if len(rss) < ended // 100:
                rss.append(_rss_mb())
        during = len(_chromium_processes())
    finally:
        venv.close()
    left = _chromium_processes()
    print(f"\n{ended} episodes, {infra} infra errors, {during} Chromium processes while running; "
          f"RSS (this process + Chromium) every 100 episodes, MiB: {[round(r) for r in rss]}")
    assert during > 0  # the browser ran as this process's child
    assert not left, [p.pid for p in left]
    assert infra <= ended // 100
    early, late = max(rss[1:4]), max(rss[-3:])
    assert late < 1.5 * early + 200, rss  # no growth with the episodes played
