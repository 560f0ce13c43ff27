"""The SWE backend contract: the ``SWEBackend`` protocol and what every backend shares.

A backend hands out sandboxes (``agentgym.sandbox.Sandbox``) whose ``<workdir>/repo``
(``REPO_DIR``) holds an instance's repository checked out at ``base_commit`` with a clean git
status, ``setup`` already run, and ``python3``, ``pytest`` and ``git`` on ``PATH``. Each one
belongs to one episode (or to one grading run) and is destroyed on ``release``.

Backends share this Protocol, not a base class; ``agentgym.envs.swe.backends`` lists them and
``make_backend`` builds one. This module imports none of them.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agentgym.core.errors import SandboxError
from agentgym.envs.swe.instances import SWEInstance
from agentgym.sandbox import Sandbox

__all__ = ["BASE_REF", "REPO_DIR", "SETUP_TIMEOUT", "SWEBackend", "prepare_repo"]

REPO_DIR = "repo"
BASE_REF = "refs/agentgym/base"
"""Set by a backend whose image keeps the repository on a commit of its own on top of
``base_commit`` (the SWE-bench layout): diffs are taken against it (``grader.diff_base``)."""
"""The repository's folder, relative to the sandbox's work dir (``f"{sb.workdir}/repo"``)."""
SETUP_TIMEOUT = 600.0
"""Default seconds each of an instance's setup commands may run."""


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
