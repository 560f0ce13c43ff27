"""Start ``agentgym serve-env`` in a child process, and read a server's ``/status``.

``start_server`` runs ``python -m agentgym serve-env --env ENV_ID --port 0 ...`` and waits for
the line the server prints once it listens, which names the port it took. ``RemoteEnv`` uses it
when it is given no ``url``; tests and benchmarks use it to get a server in a separate process.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import InfraError
from agentgym.vector.protocol import READY_PREFIX, STATUS_PATH, http_url

__all__ = ["LocalServer", "server_status", "start_server"]

STOP_TIMEOUT = 10.0


@dataclass
class LocalServer:
    """A served env in a child process; ``close`` stops it (SIGTERM, then SIGKILL)."""

    process: subprocess.Popen[str]
    url: str
    output: list[str] = field(default_factory=list)

    def status(self, timeout: float = 10.0) -> dict[str, Any]:
        status = server_status(self.url, timeout)
        if status is None:
            raise InfraError(f"the server at {self.url} has no {STATUS_PATH} route")
        return status

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _drain(process: subprocess.Popen[str], lines: list[str]) -> None:
    """Keep reading the child's stdout so that it never blocks on a full pipe."""
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        del lines[:-50]


def _wait_ready(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    lines: list[str] = []
    end = time.monotonic() + timeout
    exited = False
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while (left := end - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            line = process.stdout.readline()
            if not line:  # EOF: the server exited
                exited = True
                break
            lines.append(line.rstrip("\n"))
            if line.startswith(READY_PREFIX):
                return line.split()[-1]
    process.kill()
    process.wait()
    said = "\n".join(lines[-20:])
    if exited:
        why = f"exited with status {process.returncode}"
    else:
        why = f"was not listening within {timeout:g} s (start_server's timeout: raise it)"
    raise InfraError(f"agentgym serve-env {why}; its output:\n{said}")


def start_server(
    env_id: str,
    *,
    num_envs: int = 1,
    env_kwargs: Mapping[str, Any] | None = None,
    host: str = "127.0.0.1",
    args: Sequence[str] = (),
    timeout: float = 120.0,
) -> LocalServer:
    """Serve ``env_id`` from a child process on a free port of ``host``; returns once it listens.

    ``env_kwargs`` travel as JSON; ``args`` are more ``agentgym serve-env`` options. The child's
    stderr is this process's. Raises ``InfraError`` with the child's output if it exits or is
    not listening within ``timeout`` seconds (a bad env id, a missing extra).
    """
    command = [sys.executable, "-m", "agentgym", "serve-env", "--env", env_id, "--host", host]
    command += ["--port", "0", "--num-envs", str(num_envs), *args]
    if env_kwargs:
        command += ["--env-kwargs", *(f"{k}={json.dumps(v)}" for k, v in env_kwargs.items())]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
    url = _wait_ready(process, timeout)
    server = LocalServer(process, url)
    threading.Thread(target=_drain, args=(process, server.output), daemon=True).start()
    return server


def server_status(url: str, timeout: float = 10.0) -> dict[str, Any] | None:
    """The ``/status`` of an agentgym env server; ``None`` for an OpenEnv server without it.
    Raises ``OSError`` when nothing answers at ``url``."""
    try:
        with urllib.request.urlopen(http_url(url) + STATUS_PATH, timeout=timeout) as response:
            return dict(json.load(response))
    except urllib.error.HTTPError as e:
        with contextlib.suppress(Exception):
            e.close()
        if e.code == 404:
            return None
        raise
