"""Scale (slow): 64 concurrent episodes through AgentVectorEnv on one browser, and many episodes
with browser recycling that leave no Chromium behind and keep memory bounded. Figures are
printed (run with -s); speed is not asserted here (benchmarks/ measures it).

The recycling run plays 120 episodes (a browser every 24: five browsers) by default, ~2 minutes
of a loaded 2-core machine; ``AGENTGYM_WEB_EPISODES=1000`` plays the issue's 1,000 (a browser
every 200), ~16 minutes there. MiniWoB's own 1,000-episode run is
tests/envs/web/miniwob/test_miniwob_vector.py."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from web_helpers import live_processes

from agentgym.vector import AgentVectorEnv

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="process checks read /proc"),
]

EPISODES = int(os.environ.get("AGENTGYM_WEB_EPISODES", "120"))
RECYCLE_EVERY = EPISODES // 5

ONE_CLICK = [
    {
        "task_id": "press-once",
        "instruction": "Press the button.",
        "checks": [{"js": "() => document.getElementById('out').textContent === 'clicked 1'"}],
    }
]


def rss_mib(pids: list[int], field: str = "VmRSS") -> float:
    """Summed ``field`` of ``pids``: ``VmRSS`` (``/proc/PID/status``) or ``Pss``
    (``/proc/PID/smaps_rollup``: shared pages divided among the processes sharing them, so a
    browser's many processes that map the same binary are not counted once each)."""
    total = 0
    source = "status" if field.startswith("Vm") else "smaps_rollup"
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/{source}").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(f"{field}:"):
                total += int(line.split()[1])
    return total / 1024


def browser_pids(groups: set[int]) -> list[int]:
    return [pid for group in groups for pid in live_processes(group)]


def groups_of(envs: AgentVectorEnv) -> set[int]:
    out = set()
    for env in envs.envs:
        pool = env.unwrapped._pool
        if pool is not None:
            out |= {b.pgid for b in pool.browsers if b.pgid is not None}
    return out


def vector(n: int, site_url: str, **kwargs: Any) -> AgentVectorEnv:
    from agentgym.envs.web.env import WebEnv

    # What these tests check (one browser, no leak, bounded memory) must not hang on how loaded
    # the machine is: 64 pages opening at once beside CI's training runs missed the default
    # 30 s step deadline, and 64 clicks at once missed the default 3 s action deadline (each
    # then a scored failed click: reward 0). A page that never opens or a button that never
    # takes the click still fails the test, after 5 minutes.
    def make() -> WebEnv:
        return WebEnv(
            start_url=site_url,
            tasks=ONE_CLICK,
            step_timeout=300.0,
            action_timeout=300.0,
            **kwargs,
        )

    return AgentVectorEnv([make] * n)


@pytest.mark.timeout(900)
def test_64_concurrent_episodes_share_one_browser(chromium: str, site_url: str) -> None:
    envs = vector(64, site_url)
    groups: set[int] = set()
    try:
        started = time.perf_counter()
        _, infos = envs.reset(seed=0)
        reset_s = time.perf_counter() - started
        assert not any(infos["infra_error"])
        groups = groups_of(envs)
        assert len(groups) == 1  # one browser, 64 contexts
        started = time.perf_counter()
        observations, rewards, terminated, truncated, infos = envs.step(["click(3)"] * 64)
        step_s = time.perf_counter() - started
        missed = [str(o)[-400:] for o, r in zip(observations, rewards, strict=True) if r != 1.0]
        assert list(rewards) == [1.0] * 64, f"{len(missed)} missed; first: {missed[:1]}"

        assert all(terminated)
        assert not any(truncated)
        memory = rss_mib([os.getpid(), *browser_pids(groups)], "Pss")
        print(
            f"\n64 envs: reset of all {reset_s:.2f} s, one step of all {step_s:.2f} s "
            f"({64 / step_s:.1f} steps/s), PSS agent + Chromium {memory:.0f} MiB"
        )
    finally:
        envs.close()
    deadline = time.monotonic() + 30
    while browser_pids(groups) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert browser_pids(groups) == []


@pytest.mark.timeout(3600)
def test_many_episodes_leak_no_chromium_and_keep_memory_bounded(
    chromium: str, site_url: str
) -> None:
    envs = vector(8, site_url, recycle_every=RECYCLE_EVERY)
    groups: set[int] = set()
    samples: list[tuple[int, float, list[float]]] = []
    episodes = 0
    try:
        envs.reset(seed=0)
        started = time.perf_counter()
        while episodes < EPISODES:
            # Autoreset (next step): odd steps end the episodes, even steps start the next ones.
            _, rewards, terminated, _, infos = envs.step(["click(3)"] * 8)
            if all(terminated):
                assert list(rewards) == [1.0] * 8
                episodes += 8
                groups |= groups_of(envs)
                if episodes % RECYCLE_EVERY == 0:
                    agent = rss_mib([os.getpid()])
                    live = [live_processes(g) for g in sorted(groups)]
                    samples.append((episodes, agent, [rss_mib(p, "Pss") for p in live if p]))
            else:
                assert not any(infos.get("infra_error", [False]))
        took = time.perf_counter() - started
    finally:
        envs.close()
    deadline = time.monotonic() + 30
    while browser_pids(groups) and time.monotonic() < deadline:
        time.sleep(0.1)
    leaked = browser_pids(groups)
    print(
        f"\n{EPISODES} episodes in {took:.0f} s ({EPISODES / took:.1f} episodes/s), "
        f"{len(groups)} browsers"
    )
    for count, agent, browsers in samples:
        each = ", ".join(f"{m:.0f}" for m in browsers)
        print(f"  after {count:4d} episodes: agent RSS {agent:.0f} MiB, Chromium PSS [{each}] MiB")
    print(f"  Chromium processes left after close: {len(leaked)}")
    assert leaked == []
    assert len(groups) >= 5  # recycled every RECYCLE_EVERY episodes
    # Bounded: the agent grows by less than 150 MiB from the first sample to the last. At most
    # two browsers live at once (at a recycle the replacement starts while the retiring one
    # closes its last contexts; more would be retired browsers piling up), each under 1 GiB of
    # PSS (~450 MiB measured). Not summed RSS: each of a browser's 11-15 processes counts the
    # shared binary again, so that sum swung 1.2-1.8 GiB with how many renderers of closed
    # contexts had not exited yet.
    assert samples[-1][1] - samples[0][1] < 150, samples
    assert max(len(browsers) for _, _, browsers in samples) <= 2, samples
    assert max(m for _, _, browsers in samples for m in browsers) < 1024, samples
