"""Sandboxes of every backend for the tests, and the checks that nothing of them outlives close.

Backends: ``local`` (bubblewrap), ``docker`` (a session-wide warm pool) and ``unisolated``
(``LocalSandbox(isolation="none")``, asked for by name; only for tests of limits and basic
behaviour).

A missing Docker daemon or image skips the docker tests with the reason, and a missing
bubblewrap skips the local ones, unless ``AGENTGYM_REQUIRE_DOCKER=1`` (CI sets it; its
``scripts/docker_setup.sh`` installs both): then they fail.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from agentgym.core import run_sync
from agentgym.error import SandboxIsolationWarning, SandboxUnavailable
from agentgym.sandbox import LocalSandbox, Sandbox, bwrap_usable

T = TypeVar("T")
REQUIRED = os.environ.get("AGENTGYM_REQUIRE_DOCKER") == "1"
ISOLATED = ["local", "docker"]
ALL = ["local", "docker", "unisolated"]


def arun(coro: Coroutine[Any, Any, T]) -> T:
    return run_sync(coro)


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (AGENTGYM_REQUIRE_DOCKER=1 requires it)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_pool() -> Iterator[Any]:
    from agentgym.sandbox import DockerPool

    pool = DockerPool(size=2)
    try:
        arun(pool.start())
    except SandboxUnavailable as e:
        arun(pool.close())
        _unavailable(f"docker sandbox unavailable: {e}")
    yield pool
    arun(pool.close())


def _env_marker_holders(marker: str) -> list[int]:
    """Host pids whose environment carries ``AGENTGYM_SANDBOX=marker``."""
    needle = f"AGENTGYM_SANDBOX={marker}".encode()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        pids.append(int(name))
            except OSError:
                pass
    return pids


def _processes_of_uid(uid: int) -> list[int]:
    """Live (not zombie) host pids of ``uid``; a zombie waits for an init that reaps lazily."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid != uid:
                    continue
                with open(f"/proc/{name}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        pids.append(int(name))
            except (OSError, IndexError):
                pass
    return pids


def assert_nothing_left(sb: Any) -> None:
    """After ``close``: no process of the sandbox, no container, no folder."""
    if sb.backend == "local":
        assert not _env_marker_holders(sb.id), "processes of a closed sandbox are still running"
        if sb._uid is not None:
            assert not _processes_of_uid(sb._uid), "processes of the sandbox's user remain"
        assert not os.path.exists(sb._base), "the closed sandbox's folder is still there"
        return
    import docker

    client = docker.from_env()
    with pytest.raises(docker.errors.NotFound):
        client.api.inspect_container(sb.container_id)
    if os.geteuid() == 0:
        assert not _processes_of_uid(sb._handle.uid), "processes of the container's user remain"
    assert not os.path.exists(sb._handle.host_dir)


def make_sandbox(backend: str, request: pytest.FixtureRequest, **kwargs: Any) -> Sandbox:
    if backend == "docker":
        pool = request.getfixturevalue("docker_pool")
        return arun(pool.acquire(**kwargs))
    if backend == "local":
        if not bwrap_usable():
            _unavailable("bubblewrap (bwrap) is not installed or cannot create namespaces here")
        return LocalSandbox(isolation="bwrap", **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxIsolationWarning)
        return LocalSandbox(isolation="none", **kwargs)


@pytest.fixture
def open_sandbox(request: pytest.FixtureRequest) -> Iterator[Callable[..., Sandbox]]:
    """``open_sandbox(backend, **kwargs)``: a sandbox closed (and checked) after the test."""
    opened: list[Sandbox] = []

    def opener(backend: str, **kwargs: Any) -> Sandbox:
        sb = make_sandbox(backend, request, **kwargs)
        opened.append(sb)
        return sb

    yield opener
    for sb in opened:
        arun(sb.close())
        assert_nothing_left(sb)


@pytest.fixture(params=ALL)
def sandbox(request: pytest.FixtureRequest, open_sandbox: Callable[..., Sandbox]) -> Sandbox:
    """A sandbox of each backend, isolated or not."""
    return open_sandbox(request.param)


@pytest.fixture(params=ISOLATED)
def isolated(request: pytest.FixtureRequest, open_sandbox: Callable[..., Sandbox]) -> Sandbox:
    """A sandbox of each isolating backend."""
    return open_sandbox(request.param)
