"""The web tests' fixtures: a Chromium check, a small local site served over real HTTP, and envs
on it.

A missing Chromium or Playwright skips the browser tests, unless ``AGENTGYM_REQUIRE_CHROMIUM=1``
(``make test`` sets it once the services set-up installed Chromium): then they fail.
"""

from __future__ import annotations

import http.server
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from web_helpers import TASKS, serve

from agentgym.error import Error

REQUIRED = os.environ.get("AGENTGYM_REQUIRE_CHROMIUM") == "1"


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable (and Playwright); skipped without them, failed in CI."""
    try:
        import playwright.async_api  # noqa: F401

        from agentgym.envs.web.browser import chromium_path

        return chromium_path()
    except (Error, ImportError) as e:
        if REQUIRED:
            pytest.fail(f"{e} (AGENTGYM_REQUIRE_CHROMIUM=1 requires Chromium and Playwright)")
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def site() -> Iterator[http.server.ThreadingHTTPServer]:
    server = serve()
    yield server
    server.shutdown()


@pytest.fixture(scope="session")
def site_url(site: http.server.ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{site.server_address[1]}/"


@pytest.fixture
def make_env(chromium: str, site_url: str) -> Iterator[Callable[..., Any]]:
    """``make_env(**kwargs)``: a ``WebEnv`` on the test site, closed after the test."""
    from agentgym.envs.web.env import WebEnv

    made: list[Any] = []

    def make(**kwargs: Any) -> Any:
        kwargs.setdefault("tasks", TASKS)
        # A deadline that catches a hang only: the default 30 s can pass on a loaded machine (a
        # fresh Chromium's first page beside CI's other runs); tests of the deadline pass theirs.
        kwargs.setdefault("step_timeout", 300.0)
        env = WebEnv(start_url=site_url, **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


