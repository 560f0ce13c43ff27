"""Helpers of the docker SWE tests: a label per test, and the containers that carry it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

TEST_LABEL = "agentgym.test"


def new_label() -> dict[str, str]:
    """Labels that only this test's containers carry."""
    return {TEST_LABEL: uuid.uuid4().hex[:12]}


def containers(labels: dict[str, str]) -> list[dict[str, Any]]:
    """Every container (running or not) carrying ``labels``, as the daemon lists them (``Id``,
    ``Image``, ``Labels``, ...; one request, so a container removed meanwhile cannot fail it)."""
    import docker  # the [docker] extra; a missing SDK must fail, not skip

    filters = [f"{k}={v}" for k, v in labels.items()]
    found: list[dict[str, Any]] = docker.from_env().api.containers(
        all=True, filters={"label": filters}
    )
    return found


def wait_until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def processes_in(container_id: str) -> list[str]:
    """The command lines running in a container, but its init and ``sleep infinity``."""
    import docker

    top = docker.from_env().api.top(container_id, ps_args="-eo pid,args")
    lines = [proc[-1] for proc in top.get("Processes") or []]
    return [line for line in lines if "sleep infinity" not in line and "docker-init" not in line]
