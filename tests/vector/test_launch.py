"""``start_server``'s failures say which happened: the child exited, or it was not listening in
time (then the child is killed, and the message names the timeout to raise)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentgym.core.errors import InfraError
from agentgym.vector.launch import _wait_ready


def child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, bufsize=1
    )


def test_a_child_that_exits_is_reported_with_its_status_and_output() -> None:
    process = child("print('no such env', flush=True); raise SystemExit(3)")
    with pytest.raises(InfraError, match=r"exited with status 3;[\s\S]*no such env"):
        _wait_ready(process, timeout=60)


def test_a_child_still_starting_at_the_timeout_is_killed_and_named_slow() -> None:
    process = child("import time; time.sleep(60)")
    with pytest.raises(InfraError, match=r"not listening within 1 s") as error:
        _wait_ready(process, timeout=1)
    assert "exited" not in str(error.value)
    assert process.returncode is not None  # killed, not left running
