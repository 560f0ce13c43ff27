"""The ``local`` SWE backend: a ``LocalSandbox`` (bubblewrap) per sandbox, the repository copied in.

The repository is checked out once per instance on the host and copied into each sandbox. The
sandboxes run the host's ``/usr/bin/python3`` with Debian's ``python3-pytest`` and ``git``.
Checkouts are shared by every local backend of the process and removed at exit. Without
bubblewrap the backend refuses to start; ``isolation="none"`` (``sandbox="unsafe-local"``) runs
unisolated, asked for by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import subprocess

from agentgym.core.errors import ConfigError, SandboxError, SandboxUnavailable
from agentgym.envs.swe.backends.base import REPO_DIR, SETUP_TIMEOUT, prepare_repo
from agentgym.envs.swe.instances import SWEInstance
from agentgym.envs.swe.repo import CheckoutCache
from agentgym.sandbox import Limits, LocalSandbox, Sandbox
from agentgym.sandbox.selection import BWRAP_FIX, warn_unisolated, why_not_local

__all__ = ["LocalSWEBackend", "host_problem"]


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
def host_problem() -> str | None:
    """What the local backend lacks on this machine, with the fix, or None (checked once)."""
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
        problem = problem or host_problem()
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
