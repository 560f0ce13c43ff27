"""The viewer tests' run: a real tiny ``agentgym train`` (FrozenLake GRPO, 2 updates of 4
episodes; ~15 s on a CPU), made once per session and only read after."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest
import torch

from agentgym.cli import main
from agentgym.error import Error

TRAIN = [
    "train", "--env", "agentgym/FrozenLake-v0", "--algo", "grpo", "--group-size", "2",
    "--batch-size", "4", "--max-turns", "4", "--eval-episodes", "0", "--checkpoint-every", "1",
    "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            assert main([*TRAIN, "--steps", "2", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    (out.parent / "train.stdout").write_text(printed.getvalue())  # what agentgym train printed
    return out


REQUIRED = os.environ.get("AGENTGYM_REQUIRE_CHROMIUM") == "1"


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable (and Playwright); skipped without them, failed when
    ``AGENTGYM_REQUIRE_CHROMIUM=1`` (as ``.ci/run`` sets it)."""
    try:
        import playwright.sync_api  # noqa: F401

        from agentgym.envs.web.browser import chromium_path

        return chromium_path()
    except (Error, ImportError) as e:
        if REQUIRED:
            pytest.fail(f"{e} (AGENTGYM_REQUIRE_CHROMIUM=1 requires Chromium and Playwright)")
        pytest.skip(str(e))
