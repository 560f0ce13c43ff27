"""Sandboxes: run untrusted commands with limits, and read and write their files.

``await open_sandbox("local")`` or ``await open_sandbox("docker", pool=...)`` gives a ``Sandbox``:

    async with await open_sandbox("local") as sb:
        await sb.write_file("main.py", "print(input())")
        result = await sb.run(["python3", "main.py"], stdin="hi", timeout=10)
        result.stdout, result.exit_code, result.timed_out, result.oom_killed

Backends: ``LocalSandbox`` (bubblewrap where present, a bare rlimited process otherwise) and
``DockerSandbox`` (containers from a ``DockerPool`` of warm ones). Each class docstring says what
is isolated and what is not.
"""

from __future__ import annotations

from typing import Any, Literal

from agentgym.core.errors import ConfigError
from agentgym.sandbox._session import cleanup_stale
from agentgym.sandbox.base import Command, Limits, RunResult, Sandbox
from agentgym.sandbox.local import LocalSandbox, bwrap_usable

__all__ = [
    "Command",
    "DockerPool",
    "DockerSandbox",
    "Limits",
    "LocalSandbox",
    "RunResult",
    "Sandbox",
    "bwrap_usable",
    "cleanup_stale",
    "open_sandbox",
]

_LAZY = {
    "DockerPool": "agentgym.sandbox.pool",
    "DockerSandbox": "agentgym.sandbox.docker",
}


def __getattr__(name: str) -> Any:
    # The docker backend imports the docker SDK, an optional dependency: load it on first use.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agentgym.sandbox' has no attribute {name!r}")


async def open_sandbox(backend: Literal["local", "docker"] = "local", **kwargs: Any) -> Sandbox:
    """A started sandbox of ``backend``; ``kwargs`` go to ``LocalSandbox`` or the ``DockerPool``.

    For docker, pass ``pool=DockerPool(...)`` to share warm containers; without one, a container
    is started for this sandbox alone (with the ``DockerPool`` defaults for the other kwargs).
    """
    if backend == "local":
        return LocalSandbox(**kwargs)
    if backend == "docker":
        from agentgym.sandbox.pool import DockerPool

        pool = kwargs.pop("pool", None)
        if pool is None:
            return await DockerPool.standalone(**kwargs)
        return await pool.acquire(**kwargs)
    raise ConfigError(
        "backend",
        backend,
        "must be 'local' or 'docker'",
        "pass backend='local' (bubblewrap) or backend='docker'",
    )
