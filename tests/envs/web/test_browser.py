"""The browser layer: finding Chromium, one browser per loop, recycling, egress, crashes, and no
Chromium outliving close() or a SIGKILLed agent (the reaper itself: tests/core/test_reaper.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from web_helpers import TASKS, browser_group, live_processes, serve

from agentgym.core.info import outcome_of
from agentgym.envs.web.browser import BrowserUnavailable, chromium_path

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="process checks read /proc")


def wait_until_gone(pgid: int, seconds: float = 30.0) -> list[int]:
    """Poll until no process of group ``pgid`` runs, or the deadline; the survivors."""
    deadline = time.monotonic() + seconds
    while (alive := live_processes(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def test_missing_chromium_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AGENTGYM_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrowserUnavailable, match="apt-get install chromium"):
        chromium_path()
    monkeypatch.setenv("AGENTGYM_CHROMIUM", str(tmp_path / "nope"))
    with pytest.raises(BrowserUnavailable, match="AGENTGYM_CHROMIUM"):
        chromium_path()


def test_envs_on_one_loop_share_a_browser_with_a_context_each(make_env: Any) -> None:
    first, second = make_env(), make_env()

    async def both() -> tuple[Any, Any]:
        await asyncio.gather(first.areset(seed=0), second.areset(seed=1))
        return first._episode.lease, second._episode.lease

    from agentgym.core.aio import run_sync

    lease_1, lease_2 = run_sync(both())
    assert lease_1.launched is lease_2.launched
    assert lease_1.context is not lease_2.context
    assert first._pool is second._pool
    assert first._pool.launches == 1


def test_the_browser_is_recycled_and_the_old_one_ends(make_env: Any) -> None:
    env = make_env(recycle_every=2)
    env.reset(seed=0)
    old = browser_group(env)
    env.reset(seed=1)
    assert browser_group(env) == old
    env.reset(seed=2)
    assert browser_group(env) != old
    assert wait_until_gone(old) == []
    assert env._pool.launches == 2


def test_requests_to_other_origins_are_blocked(make_env: Any) -> None:
    outside = serve()  # a real server on another port: reachable, but not the task's origin
    try:
        env = make_env()
        env.reset(seed=0, options={"task_id": "press"})
        other = f"http://127.0.0.1:{outside.server_address[1]}/index.html"
        page = env.page
        from agentgym.core.aio import run_sync

        fetched = run_sync(
            page.evaluate(
                "url => fetch(url).then(r => 'ok ' + r.status, e => 'failed ' + e)", other
            )
        )
        assert fetched.startswith("failed"), fetched
        observation, *_ = env.step(f'goto("{other}")')
        assert "leaves the site" in observation[0]["content"]
        assert outside.hits == []  # nothing reached it
    finally:
        outside.shutdown()


def test_close_leaves_no_chromium(make_env: Any) -> None:
    env = make_env()
    env.reset(seed=0)
    pgid = browser_group(env)
    assert live_processes(pgid)
    env.close()
    assert wait_until_gone(pgid) == []


def test_a_killed_browser_ends_that_episode_with_infra_error(make_env: Any) -> None:
    env = make_env()
    env.reset(seed=0, options={"task_id": "press"})
    pgid = browser_group(env)
    os.kill(pgid, signal.SIGKILL)  # the browser process leads its group
    observation, reward, terminated, truncated, info = env.step("click(3)")
    assert info["infra_error"] is True
    assert truncated
    assert not terminated
    assert info["truncation_reason"] == "infra_error"
    assert reward == 0.0
    assert "browser failed" in observation[0]["content"]
    assert wait_until_gone(pgid) == []
    # The next reset starts a new browser and plays normally.
    _, info = env.reset(seed=0, options={"task_id": "press"})
    assert not info["infra_error"]
    assert browser_group(env) != pgid
    _, _, _, _, info = env.step("click(3)")
    assert "infra_error" not in info


def test_a_reset_after_a_crash_never_waits_for_a_spare_of_the_dead_browser(
    make_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentgym.envs.web.browser import BrowserPool

    async def stuck(self: Any, key: str, timeout: float, context_args: Any) -> None:
        await asyncio.Event().wait()  # a call in flight when Chromium died, never answered

    monkeypatch.setattr(BrowserPool, "_refill", stuck)
    env = make_env(step_timeout=60.0)
    env.reset(seed=0, options={"task_id": "press"})
    pool = env._pool
    (dead,) = [task for task in pool._refills.values() if not task.done()]
    os.kill(browser_group(env), signal.SIGKILL)
    assert env.step("click(3)")[4]["infra_error"] is True
    # Before: the reset waited for that spare as long as its own deadline, and failed with it.
    _, info = env.reset(seed=0, options={"task_id": "press"})
    assert not info["infra_error"], info.get("error")
    assert dead.cancelled()
    _, _, _, _, info = env.step("click(3)")
    assert "infra_error" not in info


def test_a_page_the_models_action_hung_is_a_scored_timeout_not_an_infra_error(
    make_env: Any,
) -> None:
    env = make_env(step_timeout=6.0)
    env.reset(seed=0, options={"task_id": "press"})
    env.step('goto("/hang.html")')
    pgid = browser_group(env)
    observation, reward, terminated, truncated, info = env.step("click(1)")  # JS loops forever
    assert info["timed_out"] is True
    assert "infra_error" not in info
    assert terminated
    assert not truncated
    assert reward == 0.0
    assert info["success"] is False
    assert outcome_of({}, [info], truncated=truncated) == "timeout"
    assert "did not respond within 6 s" in observation[-1]["content"]
    _, info = env.reset(seed=0, options={"task_id": "press"})
    assert not info["infra_error"]
    _, _, _, _, info = env.step("click(3)")
    assert "infra_error" not in info
    assert wait_until_gone(pgid) == []  # the browser with the frozen renderer was replaced


def test_a_browser_that_stops_answering_is_an_infra_error_not_a_timeout(make_env: Any) -> None:
    env = make_env(step_timeout=4.0, probe_timeout=3.0)
    env.reset(seed=0, options={"task_id": "press"})
    pgid = browser_group(env)
    os.killpg(pgid, signal.SIGSTOP)  # the whole browser freezes, not a page of the model's
    try:
        _, reward, terminated, truncated, info = env.step("click(3)")
    finally:
        os.killpg(pgid, signal.SIGCONT)
    assert info["infra_error"] is True
    assert "DeadlineExceeded" in info["error"]
    assert truncated
    assert not terminated
    assert reward == 0.0
    assert outcome_of({}, [info], truncated=truncated) == "infra"
    _, info = env.reset(seed=0, options={"task_id": "press"})
    assert not info["infra_error"]
    assert wait_until_gone(pgid) == []  # the frozen browser was replaced


AGENT = textwrap.dedent(
    """
    import sys, time
    from agentgym.envs.web.env import WebEnv
    env = WebEnv(start_url=sys.argv[1], tasks=[{"instruction": "x", "checks": [{"text": "y"}]}])
    env.reset(seed=0)
    print(env._episode.lease.launched.pgid, flush=True)
    time.sleep(600)
    """
)


def test_sigkill_of_the_agent_leaves_no_chromium(chromium: str, site_url: str) -> None:
    root = Path(__file__).resolve().parents[3]
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, site_url], stdout=subprocess.PIPE, text=True, cwd=root
    )
    try:
        line = agent.stdout.readline() if agent.stdout else ""
        assert line.strip().isdigit(), f"the agent printed {line!r}"
        pgid = int(line)
        assert live_processes(pgid)
        agent.kill()  # SIGKILL: no handler, no atexit, no finally runs in the agent
        agent.wait(30)
        assert wait_until_gone(pgid) == []
    finally:
        agent.kill()
        agent.wait(30)


def test_tasks_fixture_is_used() -> None:
    assert [t["task_id"] for t in TASKS] == ["form", "press", "answer"]
