"""Where SWE episodes run: the ``SWEBackend`` protocol, its backends and ``make_backend``.

``make_backend("local")`` or ``make_backend("docker", pool_size=4)``; both satisfy the
``SWEBackend`` Protocol (``agentgym.envs.swe.backends.base``). Backends:

- ``local`` (``LocalSWEBackend``, ``backends.local``): a bubblewrap sandbox per episode, the
  repository copied in from a host checkout; ``isolation="none"`` only when asked by name.
- ``docker`` (``DockerSWEBackend``, ``backends.docker``, imported when first made): a container
  per episode from the instance's image (``agentgym.envs.swe.images``), kept warm.
"""

from __future__ import annotations

from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.envs.swe.backends import local
from agentgym.envs.swe.backends.base import REPO_DIR, SETUP_TIMEOUT, SWEBackend, prepare_repo
from agentgym.envs.swe.backends.local import LocalSWEBackend
from agentgym.sandbox import SANDBOXES, check_sandbox, resolve_sandbox

__all__ = [
    "BACKENDS",
    "REPO_DIR",
    "SETUP_TIMEOUT",
    "LocalSWEBackend",
    "SWEBackend",
    "make_backend",
    "prepare_repo",
]

BACKENDS = SANDBOXES
"""The ``sandbox=`` values: ``"auto"``, ``"local"``, ``"docker"``, ``"unsafe-local"``."""


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
        # Looked up at call time: tests stand in for the host probe on the module.
        name = resolve_sandbox("auto", local_needs=local.host_problem)
    elif name == "docker":
        resolve_sandbox("docker", image=None)  # an instance may name an image of its own
    if name == "docker":
        _check_isolation(isolation, "docker", ())
        # The docker backend loads the image builder and the container pool: only when asked.
        from agentgym.envs.swe.backends.docker import DockerSWEBackend

        return DockerSWEBackend(**options)
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
