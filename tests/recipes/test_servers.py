"""Servers a run launches (``--launch N``): started from the template and waited for, a crashed
one restarted on its port, and none left once the process that launched them is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agentgym.core.errors import ConfigError
from agentgym.recipes.servers import SGLANG_TEMPLATE, ServerFleet

ROOT = Path(__file__).resolve().parents[2]

# The trainer's stand-in: launches two agentgym serve, reports their pids, and again after
# each restart, then waits to be killed.
LAUNCHER = """
import json, sys, time
from agentgym.recipes.servers import ServerFleet

def report(url=None):
    print(json.dumps({"pids": fleet.pids, "urls": fleet.urls, "restarted": url}), flush=True)

fleet = ServerFleet(
    2, model="unused", template="{python} -m agentgym serve --host {host} --port {port}",
    startup_timeout=180, poll_s=0.2, on_restart=report,
)
fleet.start()
report()
while True:
    time.sleep(1)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _line(process: subprocess.Popen[str], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    buffered = ""
    while time.monotonic() < deadline:
        chunk = process.stdout.readline()
        buffered += chunk or ""
        if buffered.endswith("\n"):
            return json.loads(buffered)
        assert process.poll() is None, f"the launcher exited: {process.stderr.read()[-3000:]}"
        time.sleep(0.1)
    raise AssertionError(f"no report from the launcher in {timeout} s")


@pytest.mark.slow  # three agentgym serve starts (~10 CPU-s each)
def test_a_crashed_server_is_restarted_and_none_outlives_a_sigkilled_launcher():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    pids: list[int] = []
    try:
        first = _line(launcher, 240)
        urls, started = first["urls"], first["pids"]
        pids.extend(started)
        assert len(set(urls)) == 2
        for url in urls:
            assert httpx.get(f"{url}/health", timeout=5).status_code == 200
        os.kill(started[1], signal.SIGKILL)  # the second server crashes
        second = _line(launcher, 240)
        assert second["restarted"] == urls[1]  # on its port: the trainer's URL stays valid
        assert second["pids"][0] == started[0]  # the other one ran on
        restarted = second["pids"][1]
        pids.append(restarted)
        assert restarted != started[1]
        assert httpx.get(f"{urls[1]}/health", timeout=5).status_code == 200
        launcher.kill()  # SIGKILL: no atexit, no finally; only the reaper is left
        launcher.wait(10)
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in pids if _alive(p)], "a server outlived its launcher"
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for p in pids:
            if _alive(p):
                os.killpg(p, signal.SIGKILL)


def test_the_template_and_count_are_checked_before_anything_starts():
    with pytest.raises(ConfigError, match="launch"):
        ServerFleet(0, model="m")
    with pytest.raises(ConfigError, match=r"\{gpu\}"):
        ServerFleet(1, model="m", template="serve --port {port} --gpu {gpu}")
    with pytest.raises(ConfigError, match=r"no \{port\}"):
        ServerFleet(1, model="m", template="serve --model {model}")
    fleet = ServerFleet(2, model="/m", devices=["3", "5"])
    assert fleet.command(1)[:3] == [sys.executable, "-m", "sglang.launch_server"]
    assert fleet.command(1)[-2:] == ["--base-gpu-id", "5"]
    assert fleet.command(0)[fleet.command(0).index("--port") + 1] == fleet.urls[0].rsplit(":")[-1]
    assert fleet.template == SGLANG_TEMPLATE
    fleet.close()  # nothing started: nothing to stop
