"""Where SWE episodes run: the ``SWEBackend`` protocol, the ``local`` backend and ``make_backend``.

A backend hands out sandboxes (``agentgym.sandbox.Sandbox``) whose ``<workdir>/repo``
(``REPO_DIR``) holds an instance's repository checked out at ``base_commit`` with a clean git
status, ``setup`` already run, and ``python3``, ``pytest`` and ``git`` on ``PATH``. Each one
belongs to one episode (or to one grading run) and is destroyed on ``release``.

Backends:

- ``local`` (``LocalSWEBackend``): a ``LocalSandbox`` (bubblewrap) per sandbox; the
  repository is checked out once per instance on the host and copied in. Runs the host's
  ``/usr/bin/python3`` with Debian's ``python3-pytest`` and ``git``. Checkouts are shared by
  every local backend of the process and removed at exit.
- ``docker`` (``DockerSWEBackend`` in ``agentgym.envs.swe.docker_backend``, imported lazily):
  a container per sandbox from the instance's image. That module provides
  ``DockerSWEBackend(**options)`` and ``docker_available() -> bool``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import shutil
import subprocess
from typing import Any, Protocol, runtime_checkable

from agentgym.core.errors import ConfigError, SandboxError, SandboxUnavailable
from agentgym.envs.swe.instances import SWEInstance
from agentgym.envs.swe.repo import CheckoutCache
from agentgym.sandbox import Limits, LocalSandbox, Sandbox

__all__ = [
    "BACKENDS",
    "REPO_DIR",
    "LocalSWEBackend",
    "SWEBackend",
    "make_backend",
    "prepare_repo",
]

REPO_DIR = "repo"
"""The repository's folder, relative to the sandbox's work dir (``f"{sb.workdir}/repo"``)."""
BACKENDS = ("auto", "docker", "local")
SETUP_TIMEOUT = 600.0


@runtime_checkable
class SWEBackend(Protocol):
    """Hands out sandboxes holding an instance's repository; see the module docstring."""

    name: str
    """``"docker"`` or ``"local"``."""

    async def acquire(self, instance: SWEInstance) -> Sandbox:
        """A sandbox of this episode alone, its ``REPO_DIR`` at ``base_commit``, setup run.

        Raises ``SandboxError`` when the backend fails, ``ConfigError`` for a bad instance.
        """
        ...

    async def release(self, sandbox: Sandbox) -> None:
        """Destroy ``sandbox`` (it is never handed out again); a second call is a no-op."""
        ...

    async def aclose(self) -> None:
        """Release every sandbox this backend still holds; idempotent."""
        ...


async def prepare_repo(sandbox: Sandbox, instance: SWEInstance, *, timeout: float) -> None:
    """Run ``instance.setup`` in the sandbox's repository, then refresh git's index.

    For backends that copy a checkout in: the copy changes every file's stat data, and a
    refreshed index keeps ``git status`` fast. A failing setup command raises ``SandboxError``
    with its output.
    """
    for command in instance.setup:
        run = await sandbox.run(command, timeout=timeout, cwd=REPO_DIR)
        if not run.ok:
            status = "timed out" if run.timed_out else f"exit code {run.exit_code}"
            raise SandboxError(
                f"setup command {command!r} of {instance.instance_id} failed ({status}): "
                f"{(run.stdout + run.stderr)[-1000:]}"
            )
    await sandbox.run(["git", "update-index", "-q", "--refresh"], timeout=timeout, cwd=REPO_DIR)


@functools.cache
def _host_problem() -> str | None:
    """What the local backend lacks on this machine (checked once a process), or None."""
    path = "/usr/local/bin:/usr/bin:/bin"  # what a LocalSandbox's PATH starts with
    if shutil.which("git", path=path) is None:
        return "git is not installed. Fix: apt-get install git"
    python = shutil.which("python3", path=path)
    check = "import pytest, sys; sys.exit(pytest.version_tuple < (7,))"
    try:
        ok = (
            python is not None and subprocess.run([python, "-c", check], timeout=60).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        return (
            f"the system's python3 ({python}) cannot import pytest >= 7, which runs the tests. "
            "Fix: apt-get install python3-pytest"
        )
    return None


class LocalSWEBackend:
    """Sandboxes on this machine: a ``LocalSandbox`` (bubblewrap) with the repository copied in.

    Args:
        limits: the sandboxes' default ``Limits`` (memory, processes, file size, output).
        isolation: ``"auto"`` (bubblewrap when it works, else unisolated with a warning),
            ``"bwrap"`` (fail without it) or ``"none"``.
        setup_timeout: seconds each of an instance's setup commands may run.

    Raises ``SandboxUnavailable`` naming the fix when this machine lacks ``git`` or a system
    ``python3`` with pytest >= 7 (Debian: ``apt-get install git python3-pytest``).
    """

    name = "local"

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        isolation: str = "auto",
        setup_timeout: float = SETUP_TIMEOUT,
    ) -> None:
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigError("limits", limits, "must be an agentgym.sandbox.Limits", "Limits()")
        if isolation not in ("auto", "bwrap", "none"):
            raise ConfigError("isolation", isolation, "must be 'auto', 'bwrap' or 'none'", "auto")
        problem = _host_problem()
        if problem is not None:
            raise SandboxUnavailable(f"the local SWE backend cannot run here: {problem}")
        self.limits, self.isolation, self.setup_timeout = limits, isolation, setup_timeout
        # One checkout per instance for every env of the process (16 envs of a vector env
        # do not each clone every repository).
        self._cache = CheckoutCache.shared()
        self._live: set[LocalSandbox] = set()
        self._closed = False

    async def acquire(self, instance: SWEInstance) -> Sandbox:
        if self._closed:
            raise SandboxError("the local SWE backend is closed")
        checkout = await asyncio.to_thread(self._cache.get, instance)
        sandbox = LocalSandbox(limits=self.limits, isolation=self.isolation)  # type: ignore[arg-type]
        self._live.add(sandbox)
        try:
            await sandbox.upload(checkout, REPO_DIR)
            await prepare_repo(sandbox, instance, timeout=self.setup_timeout)
        except BaseException:
            await self.release(sandbox)
            raise
        return sandbox

    async def release(self, sandbox: Sandbox) -> None:
        self._live.discard(sandbox)  # type: ignore[arg-type]
        await sandbox.close()

    async def aclose(self) -> None:
        self._closed = True
        live, self._live = list(self._live), set()
        for sandbox in live:
            with contextlib.suppress(SandboxError):
                await sandbox.close()


def _docker_module() -> Any:
    return importlib.import_module("agentgym.envs.swe.docker_backend")


def _docker_answers() -> bool:
    try:
        module = _docker_module()
    except ModuleNotFoundError as e:  # the module (not yet) or the docker SDK is missing
        if e.name not in ("agentgym.envs.swe.docker_backend", "docker"):
            raise
        return False
    return bool(module.docker_available())


def make_backend(name: str | None = None, **options: Any) -> SWEBackend:
    """The backend called ``name``: ``"local"``, ``"docker"``, or ``None`` / ``"auto"``
    (docker when a daemon answers, else local). ``options`` go to the backend's constructor."""
    if name is None or name == "auto":
        name = "docker" if _docker_answers() else "local"
    if name == "local":
        return LocalSWEBackend(**options)
    if name == "docker":
        backend: SWEBackend = _docker_module().DockerSWEBackend(**options)
        return backend
    raise ConfigError(
        "sandbox",
        name,
        "must be 'auto', 'docker' or 'local'",
        "pass sandbox='local' (bubblewrap, no Docker needed) or 'docker'",
    )
