"""``DockerPool``'s ``prepare`` command, extra ``labels``, ``resize`` and cancelled acquires."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from agentgym.error import ConfigError, SandboxError
from agentgym.sandbox import DockerPool

from .conftest import arun


def _labelled(labels: dict[str, str]) -> list[dict[str, Any]]:
    import docker  # the [docker] extra; a missing SDK must fail, not skip

    filters = [f"{k}={v}" for k, v in labels.items()]
    found: list[dict[str, Any]] = docker.from_env().api.containers(
        all=True, filters={"label": filters}
    )
    return found


def _wait_until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


@pytest.fixture
def labels(docker_pool: Any) -> dict[str, str]:
    return {"agentgym.test": uuid.uuid4().hex[:12]}


def test_prepare_runs_as_the_sandbox_user_before_handing_out(labels: dict[str, str]) -> None:
    pool = DockerPool(size=1, prepare=["sh", "-c", "id -u > who; pwd > where"], labels=labels)
    try:
        arun(pool.start())
        sb = arun(pool.acquire())
        run = arun(sb.run("cat who where; id -u", timeout=30))
        who, where, me = run.stdout.split()
        assert (who, where) == (me, "/work")
        (listed,) = [c for c in _labelled(labels) if c["Id"] == sb.container_id]
        assert listed["Labels"]["agentgym.sandbox"] == "1"  # the pool's own labels stay
    finally:
        arun(pool.close())
    assert not _labelled(labels)


def test_a_failing_prepare_removes_the_container(labels: dict[str, str]) -> None:
    pool = DockerPool(size=0, prepare=["sh", "-c", "echo no repo here >&2; exit 3"], labels=labels)
    try:
        with pytest.raises(SandboxError, match=r"exited with 3.*no repo here"):
            arun(pool.acquire())
        assert not _labelled(labels)
    finally:
        arun(pool.close())


def test_resize_starts_and_removes_warm_containers(labels: dict[str, str]) -> None:
    pool = DockerPool(size=1, labels=labels)
    try:
        arun(pool.start())
        pool.resize(3)
        arun(pool.start())
        assert len(_labelled(labels)) == 3
        pool.resize(0)
        assert _wait_until(lambda: not _labelled(labels), 30)
        with pytest.raises(ConfigError, match="size"):
            pool.resize(-1)
    finally:
        arun(pool.close())


def test_a_cancelled_acquire_leaves_no_container(labels: dict[str, str]) -> None:
    pool = DockerPool(size=0, labels=labels)

    async def cancel_midway() -> None:
        task = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0.1)  # the container is being created
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        arun(cancel_midway())
        assert _wait_until(lambda: not _labelled(labels), 30)
    finally:
        arun(pool.close())


def test_bad_prepare_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="prepare"):
        DockerPool(prepare="cp -a /a /b")  # type: ignore[arg-type]
