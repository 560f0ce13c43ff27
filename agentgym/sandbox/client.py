"""The docker SDK's client for the local daemon, for code that manages images.

Sandboxes talk to the daemon over its unix socket themselves (``_dockerapi``); building,
listing and removing images goes through the docker SDK, an optional dependency, and this
accessor.
"""

from __future__ import annotations

from typing import Any

from agentgym.core.errors import SandboxUnavailable

__all__ = ["docker_client"]


def docker_client(*, timeout: float = 600.0) -> Any:
    """A ``docker.DockerClient`` that has answered a ping; ``timeout`` is per request, in seconds.

    Raises ``SandboxUnavailable`` naming the fix when the docker SDK is not installed or no
    daemon answers.
    """
    try:
        import docker
    except ImportError as e:
        raise SandboxUnavailable("the docker SDK is not installed. Fix: pip install docker") from e
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as e:  # the SDK raises requests' and its own errors alike
        raise SandboxUnavailable(
            f"no Docker daemon answers ({e}). Fix: bash scripts/docker_setup.sh"
        ) from e
    return client
