"""Where SWE episodes run: the ``SWEBackend`` protocol, the ``local`` backend and ``make_backend``.

A backend hands out sandboxes (``agentgym.sandbox.Sandbox``) whose ``<workdir>/repo``
(``REPO_DIR``) holds an instance's repository checked out at ``base_commit`` with a clean git
status, ``setup`` already run, and ``python3``, ``pytest`` and ``git`` on ``PATH``. Each one
belongs to one episode (or to one grading run) and is destroyed on ``release``.

Backends:

- ``local`` (``LocalSWEBackend``): a ``LocalSandbox`` (bubblewrap) per sandbox; the
  repository is checked out once per instance on the host and copied in. Runs the host's
  ``/usr/bin/python3`` with Debian's ``python3-pytest`` and ``git``. Checkouts are shared by
  every local backend of the process and removed at exit. Without bubblewrap it refuses to
  start; ``isolation="none"`` (``sandbox="unsafe-local"``) runs unisolated, asked for by name.
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
from agentgym.sandbox import SANDBOXES, Limits, LocalSandbox, Sandbox, check_sandbox
from agentgym.sandbox.selection import (
    BWRAP_FIX,
    resolve_sandbox,
    warn_unisolated,
    why_not_local,
)

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
BACKENDS = SANDBOXES
"""The ``sandbox=`` values: ``"auto"``, ``"local"``, ``"docker"``, ``"unsafe-local"``."""
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


def _bwrap_problem() -> str | None:
    """Why bubblewrap cannot isolate the local backend here, with the fixes; None if it can."""
    why = why_not_local()
    if why is None:
        return None
    return (
        f"{why}, and agentgym never runs the agent's commands unisolated unless asked. Fix: "
        f"{BWRAP_FIX}; or pass sandbox='docker' (bash scripts/docker_setup.sh sets it up); or, "
        "to run them as plain processes with no isolation (they can then read and write your "
        "files and use the network), sandbox='unsafe-local' (LocalSWEBackend(isolation='none'))"
    )


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
        isolation: ``"auto"`` or ``"bwrap"`` (both: bubblewrap, else ``SandboxUnavailable`` at
            construction), or ``"none"``: plain rlimited processes that can read and write the
            host's files and use the network, with a ``SandboxIsolationWarning`` once per
            process; only for code you trust.
        setup_timeout: seconds each of an instance's setup commands may run.

    Raises ``SandboxUnavailable`` naming the fix when bubblewrap cannot run here (unless
    ``isolation="none"``), or this machine lacks ``git`` or a system ``python3`` with
    pytest >= 7 (Debian: ``apt-get install git python3-pytest``).
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
            raise ConfigError(
                "isolation",
                isolation,
                "must be 'auto', 'bwrap' (both: bubblewrap or refuse) or 'none' (no isolation)",
                "pass isolation='auto'",
            )
        problem = _bwrap_problem() if isolation != "none" else None
        problem = problem or _host_problem()
        if problem is not None:
            raise SandboxUnavailable(f"the local SWE backend cannot run here: {problem}")
        if isolation == "none":
            warn_unisolated("the local SWE backend with isolation='none' was asked for")
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


def make_backend(name: str | None = None, **options: Any) -> SWEBackend:
    """The backend that ``sandbox=name`` stands for; ``options`` go to its constructor.

    ``"auto"`` (or None): ``local`` where bubblewrap runs and this machine has git and pytest,
    else ``docker`` where a local daemon answers and holds agentgym's image, else
    ``SandboxUnavailable`` naming the fixes. ``"local"``: bubblewrap or refuse. ``"docker"``:
    the daemon and image or refuse. ``"unsafe-local"``: the local backend with
    ``isolation="none"`` (no isolation; warned once per process). An unknown name, or an
    ``isolation`` option that contradicts the name, raises ``ConfigError``.
    """
    name = "auto" if name is None else name
    check_sandbox(name)
    isolation = options.pop("isolation", None)
    if name == "auto":
        _check_isolation(isolation, name, ("auto", "bwrap"))
        name = resolve_sandbox("auto", local_needs=_host_problem)
    elif name == "docker":
        resolve_sandbox("docker", image=None)  # an instance may name an image of its own
    if name == "docker":
        _check_isolation(isolation, "docker", ())
        backend: SWEBackend = _docker_module().DockerSWEBackend(**options)
        return backend
    if name == "unsafe-local":
        _check_isolation(isolation, name, ("none",))
        return LocalSWEBackend(isolation="none", **options)
    _check_isolation(isolation, name, ("auto", "bwrap"))
    return LocalSWEBackend(isolation="bwrap", **options)


def _check_isolation(isolation: object, name: str, allowed: tuple[str, ...]) -> None:
    """An ``isolation`` backend option must agree with ``sandbox=name`` (None: not given)."""
    if isolation is not None and isolation not in allowed:
        raise ConfigError(
            "backend_options['isolation']",
            isolation,
            f"contradicts sandbox={name!r}",
            "leave isolation out and choose with sandbox=: 'local' (bubblewrap), 'docker', "
            "'auto', or 'unsafe-local' (no isolation)",
        )
