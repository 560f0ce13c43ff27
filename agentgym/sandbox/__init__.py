"""Sandboxes: run untrusted commands with limits, and read and write their files.

``await open_sandbox()`` (bubblewrap, else Docker, else ``SandboxUnavailable``), or
``open_sandbox("local")`` / ``open_sandbox("docker", pool=...)``, gives a ``Sandbox``:

    async with await open_sandbox() as sb:
        await sb.write_file("main.py", "print(input())")
        result = await sb.run(["python3", "main.py"], stdin="hi", timeout=10)
        result.stdout, result.exit_code, result.timed_out, result.oom_killed

Backends: ``LocalSandbox`` (bubblewrap; a bare rlimited process only with ``isolation="none"``)
and ``DockerSandbox`` (containers from a ``DockerPool`` of warm ones). Each class docstring says
what is isolated and what is not. Nothing runs unisolated unless asked for by name:
``agentgym.sandbox.selection`` picks the backend of ``sandbox="auto"`` and refuses when none
isolates.

``docker_client()`` is the docker SDK's client for the local daemon (images are built, listed
and removed through it), or ``SandboxUnavailable`` naming the fix.
"""

from __future__ import annotations

from typing import Any

from agentgym.sandbox._session import cleanup_stale
from agentgym.sandbox.base import Command, Limits, RunResult, Sandbox
from agentgym.sandbox.client import docker_client
from agentgym.sandbox.image_tag import DEFAULT_IMAGE
from agentgym.sandbox.local import LocalSandbox, bwrap_usable
from agentgym.sandbox.selection import SANDBOXES, SandboxChoice, check_sandbox, resolve_sandbox

__all__ = [
    "SANDBOXES",
    "Command",
    "DockerPool",
    "DockerSandbox",
    "Limits",
    "LocalSandbox",
    "RunResult",
    "Sandbox",
    "SandboxChoice",
    "bwrap_usable",
    "check_sandbox",
    "cleanup_stale",
    "docker_client",
    "open_sandbox",
    "resolve_sandbox",
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


async def open_sandbox(backend: SandboxChoice = "auto", **kwargs: Any) -> Sandbox:
    """A started sandbox of ``backend``; ``kwargs`` go to ``LocalSandbox`` or the ``DockerPool``.

    ``backend`` is one of ``SANDBOXES``: ``"auto"`` (bubblewrap, else Docker, else
    ``SandboxUnavailable``), ``"local"`` (bubblewrap), ``"docker"`` or ``"unsafe-local"`` (no
    isolation; ``LocalSandbox(isolation="none")``). For docker, pass ``pool=DockerPool(...)`` to
    share warm containers; without one, a container is started for this sandbox alone (with the
    ``DockerPool`` defaults for the other kwargs).
    """
    check_sandbox(backend, "backend")
    if backend == "auto" and "pool" in kwargs:
        backend = "docker"  # a pool is the docker backend's
    elif backend == "auto":
        image = kwargs.get("image", DEFAULT_IMAGE)
        backend = resolve_sandbox(backend, name="backend", image=image)
    if backend == "local":
        return LocalSandbox(**kwargs)
    if backend == "unsafe-local":
        return LocalSandbox(isolation="none", **kwargs)
    from agentgym.sandbox.pool import DockerPool

    pool = kwargs.pop("pool", None)
    if pool is None:
        return await DockerPool.standalone(**kwargs)
    return await pool.acquire(**kwargs)
