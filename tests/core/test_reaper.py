"""The reaper: a process group registered by an agent dies with the agent, SIGKILL included;
one the agent forgot is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentgym.core.reaper import watch_parent

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="process checks read /proc")


def live_processes(pgid: int) -> list[int]:
    """Pids of process group ``pgid`` that still run (zombies excluded; Linux ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def wait_until_gone(pgid: int, seconds: float = 30.0) -> list[int]:
    """Poll until no process of group ``pgid`` runs, or the deadline; the survivors."""
    deadline = time.monotonic() + seconds
    while (alive := live_processes(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


WATCHED = textwrap.dedent(
    """
    import subprocess, sys, time
    from agentgym.core.reaper import reaper
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    reaper.watch(child.pid)
    print(child.pid, reaper.pid, flush=True)
    time.sleep(600)
    """
)


def test_the_reaper_kills_registered_groups_when_its_agent_dies() -> None:
    """The watchdog alone (without Playwright's own clean-up): a process group registered by an
    agent that is then SIGKILLed is killed, and the watchdog exits."""
    root = Path(__file__).resolve().parents[2]
    agent = subprocess.Popen(
        [sys.executable, "-c", WATCHED], stdout=subprocess.PIPE, text=True, cwd=root
    )
    try:
        line = agent.stdout.readline() if agent.stdout else ""
        group, watchdog = (int(x) for x in line.split())
        assert live_processes(group)
        agent.kill()
        agent.wait(30)
        assert wait_until_gone(group) == []
        deadline = time.monotonic() + 30
        while Path(f"/proc/{watchdog}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        status = Path(f"/proc/{watchdog}/stat")
        assert not status.exists() or status.read_text().split(") ")[1][0] == "Z"
    finally:
        agent.kill()
        agent.wait(30)


def test_the_watchdog_kills_the_groups_still_registered_when_the_pipe_closes() -> None:
    """``+pgid`` registers, ``-pgid`` forgets, a garbled line is ignored; at end-of-file only the
    groups still registered are killed."""
    kept, forgotten = (subprocess.Popen(["sleep", "600"], start_new_session=True) for _ in range(2))
    read, write = os.pipe()
    try:
        os.write(
            write, f"+{kept.pid}\n+{forgotten.pid}\nkill everything\n-{forgotten.pid}\n".encode()
        )
        os.close(write)
        watch_parent(os.getppid(), read)  # the parent is alive: it returns at end-of-file
        assert wait_until_gone(kept.pid) == []
        assert live_processes(forgotten.pid) == [forgotten.pid]
    finally:
        os.close(read)
        for process in (kept, forgotten):
            process.kill()
            process.wait(30)
