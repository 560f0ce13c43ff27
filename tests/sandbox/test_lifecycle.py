"""Sandboxes end cleanly: on close, on a pool's close, and when the process that made them dies."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentgym.error import ConfigError, SandboxIsolationWarning, SandboxUnavailable
from agentgym.sandbox import LocalSandbox, Sandbox, bwrap_usable, open_sandbox
from agentgym.sandbox._session import session_folder

from .conftest import ALL, _processes_of_uid, _unavailable, arun


def _docker_client() -> Any:
    import docker  # the [docker] extra; a missing SDK must fail, not skip

    return docker.from_env()


def _wait_until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def test_sandboxes_run_side_by_side(open_sandbox: Callable[..., Sandbox]) -> None:
    boxes = [open_sandbox(backend) for backend in ALL for _ in range(2)]

    async def all_at_once() -> list[str]:
        results = await asyncio.gather(
            *(sb.run(f"sleep 0.5; echo {i}", timeout=30) for i, sb in enumerate(boxes))
        )
        return [r.stdout for r in results]

    assert arun(all_at_once()) == [f"{i}\n" for i in range(len(boxes))]


def test_runs_in_one_sandbox_are_serialised(sandbox: Sandbox) -> None:
    async def two() -> list[str]:
        script = "n=$(cat n 2>/dev/null || echo 0); sleep 0.2; echo $((n+1)) > n; cat n"
        results = await asyncio.gather(*(sandbox.run(script, timeout=30) for _ in range(3)))
        return sorted(r.stdout for r in results)

    assert arun(two()) == ["1\n", "2\n", "3\n"]


def test_killing_everything_in_reach_only_costs_that_run(isolated: Sandbox) -> None:
    # kill -1 hits the local sandbox's helper (restarted on the next run) and docker's wrapper
    r = arun(isolated.run("kill -9 -1; sleep 1; echo maybe", timeout=10))
    assert not r.timed_out
    assert arun(isolated.run("echo back", timeout=10)).stdout == "back\n"


def test_open_sandbox_local_and_bad_backend() -> None:
    if not bwrap_usable():
        _unavailable("bubblewrap (bwrap) is not installed or cannot create namespaces here")
    sb = arun(open_sandbox("local"))
    try:
        assert isinstance(sb, LocalSandbox)
        assert arun(sb.run("echo ok", timeout=10)).ok
    finally:
        arun(sb.close())
    with pytest.raises(ConfigError, match="backend"):
        arun(open_sandbox("podman"))  # type: ignore[arg-type]


def test_unisolated_sandbox_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentgym.sandbox import selection

    monkeypatch.setattr(selection, "_warned", False)  # as in a process that has not warned yet
    with pytest.warns(SandboxIsolationWarning, match="NOT isolated"):
        sb = LocalSandbox(isolation="none")
    arun(sb.close())


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"isolation": "docker"}, "isolation"),
        ({"workdir": "rel"}, "workdir"),
        ({"workdir": "/"}, "workdir"),
        ({"limits": {"memory": 1}}, "limits"),
    ],
)
def test_local_config_errors(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        LocalSandbox(**kwargs)


_LOCAL_ORPHAN = """
import asyncio, sys, warnings
warnings.simplefilter("ignore")
from agentgym.sandbox import LocalSandbox
async def main():
    sb = LocalSandbox(isolation=sys.argv[1])
    print(sb._uid, sb._base, flush=True)
    await sb.run("sleep 300", timeout=300)
asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_local_sandbox_dies_with_its_process(isolation: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the check looks for the sandbox's own uid")
    if isolation == "bwrap" and not _bwrap_ok():
        pytest.skip("bubblewrap is not usable here")
    with subprocess.Popen(
        [sys.executable, "-c", _LOCAL_ORPHAN, isolation], stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            uid, folder = proc.stdout.readline().split()
            assert _wait_until(lambda: bool(_processes_of_uid(int(uid))), 30), "it never started"
        finally:
            proc.kill()
    assert _wait_until(lambda: not _processes_of_uid(int(uid)), 15), "sandbox processes outlived us"
    assert _wait_until(lambda: not os.path.exists(folder), 30), "its folder outlived us"


def _bwrap_ok() -> bool:
    from agentgym.sandbox import bwrap_usable

    return bwrap_usable()


# -- docker ----------------------------------------------------------------------------


def _labelled(client: Any, **labels: str) -> list[Any]:
    filters = [f"{k.replace('_', '.')}={v}" for k, v in labels.items()] or ["agentgym.sandbox"]
    return client.containers.list(all=True, filters={"label": filters}, ignore_removed=True)


def test_pool_close_removes_every_container(docker_pool: Any) -> None:
    from agentgym.sandbox import DockerPool

    client = _docker_client()
    pool = DockerPool(size=2)
    arun(pool.start())
    taken = arun(pool.acquire())
    ids = {taken.container_id} | {f.result().id for f in pool._ready}
    assert len(ids) == 3
    arun(pool.close())
    arun(pool.close())
    left = {c.id for c in _labelled(client)} & ids
    assert not left
    assert not os.path.exists(taken._handle.host_dir)


def test_standalone_docker_sandbox(docker_pool: Any) -> None:
    sb = arun(open_sandbox("docker", memory=512 << 20))
    try:
        assert arun(sb.run("echo alone", timeout=30)).stdout == "alone\n"
    finally:
        arun(sb.close())
    with pytest.raises(Exception, match="No such container"):
        _docker_client().api.inspect_container(sb.container_id)  # type: ignore[attr-defined]


def test_missing_image_is_unavailable(docker_pool: Any) -> None:
    from agentgym.sandbox import DockerPool

    pool = DockerPool(size=0, image="agentgym/no-such-image:0")
    with pytest.raises(SandboxUnavailable, match="docker_setup"):
        arun(pool.acquire())
    arun(pool.close())


_DOCKER_ORPHAN = """
import asyncio
from agentgym.sandbox import DockerPool
async def main():
    pool = await DockerPool(size=1).start()
    sb = await pool.acquire()
    print(sb.container_id, flush=True)
    await sb.run("sleep 300", timeout=300)
asyncio.run(main())
"""


@pytest.mark.slow
def test_containers_are_removed_when_their_process_is_killed(docker_pool: Any) -> None:
    client = _docker_client()
    with subprocess.Popen(
        [sys.executable, "-c", _DOCKER_ORPHAN], stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            cid = proc.stdout.readline().strip()
            owner = client.api.inspect_container(cid)["Config"]["Labels"]["agentgym.owner"]
            # the sandbox and the warm one that replaced it
            assert _wait_until(lambda: len(_labelled(client, agentgym_owner=owner)) == 2, 60)
        finally:
            proc.kill()  # SIGKILL: no atexit, no finally; only the reaper is left
    assert _wait_until(lambda: not _labelled(client, agentgym_owner=owner), 60)


def test_cleanup_stale_removes_dead_owners_folders(tmp_path: Path) -> None:
    from agentgym.sandbox import cleanup_stale

    stale = Path(tempfile.mkdtemp(prefix="agentgym-1-0-"))  # pid 1 did not start at tick 0
    (stale / "sb-x").mkdir()
    mine = Path(session_folder())
    assert cleanup_stale() >= 1
    assert not stale.exists()
    assert mine.exists()


def test_cleanup_stale_removes_only_dead_owners(docker_pool: Any) -> None:
    from agentgym.sandbox import cleanup_stale
    from agentgym.sandbox.images import DEFAULT_IMAGE
    from agentgym.sandbox.pool import LABEL, OWNER

    client = _docker_client()
    dead = client.containers.create(
        DEFAULT_IMAGE, ["true"], labels={LABEL: "1", OWNER: f"{socket.gethostname()}:1:0"}
    )
    live = arun(docker_pool.acquire())
    try:
        assert cleanup_stale() >= 1
        ids = {c.id for c in _labelled(client)}
        assert dead.id not in ids
        assert live.container_id in ids
    finally:
        arun(live.close())
