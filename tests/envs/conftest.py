"""Sandbox backends for the env tests: ``local`` (bubblewrap) and ``docker``.

As in ``tests/sandbox``, a missing bubblewrap or Docker daemon/image skips the tests that need it,
unless ``AGENTGYM_REQUIRE_DOCKER=1`` (CI): then they fail.
"""

from __future__ import annotations

import os

import pytest

from agentgym.core import run_sync
from agentgym.error import SandboxUnavailable
from agentgym.sandbox import bwrap_usable

REQUIRED = os.environ.get("AGENTGYM_REQUIRE_DOCKER") == "1"


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (AGENTGYM_REQUIRE_DOCKER=1 requires it)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_ready() -> bool:
    from agentgym.sandbox import DockerPool

    pool = DockerPool(size=0)
    try:
        run_sync(pool.start())  # connects: the daemon answers and the image is there
    except SandboxUnavailable as e:
        _unavailable(f"docker sandbox unavailable: {e}")
    finally:
        run_sync(pool.close())
    return True


@pytest.fixture(params=["local", "docker"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each isolating sandbox backend, skipped (or failed in CI) where it cannot run."""
    if request.param == "docker":
        request.getfixturevalue("docker_ready")
    elif not bwrap_usable():
        _unavailable("bubblewrap (bwrap) is not installed or cannot create namespaces here")
    return str(request.param)
