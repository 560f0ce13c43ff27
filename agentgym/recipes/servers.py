"""Inference servers a run starts and owns: ``agentgym train --engine sglang --launch N``.

``ServerFleet`` starts ``count`` servers from a command template, each on a free port and its
device, waits until each answers ``GET /health``, restarts one that exits (on the same port, at
most ``max_restarts`` times in all), and stops them when closed or at interpreter exit. None
outlives the process that launched it, SIGKILL included: each server leads a process group of
its own, registered with the reaper (``agentgym.core.reaper``, the watchdog that also reaps the
web envs' browsers), which kills every group still registered once its parent is gone.

The template is a command line with ``{python}``, ``{model}``, ``{host}``, ``{port}``,
``{device}`` and ``{index}`` filled in per server; ``SGLANG_TEMPLATE`` (SGLang's
``launch_server`` on GPU ``{device}``) by default, ``SERVE_TEMPLATE`` for ``agentgym serve``.

A restarted server holds the weights it starts with, not the policy's: the ``on_restart``
callback (``ServerPolicy.server_restarted`` in a run) has the trainer push again before the
server generates for it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

import httpx

from agentgym.core.errors import ConfigError, InfraError
from agentgym.core.reaper import kill_group, reaper

__all__ = ["SERVE_TEMPLATE", "SGLANG_TEMPLATE", "ServerFleet"]

SGLANG_TEMPLATE = (
    "{python} -m sglang.launch_server --model-path {model} --host {host} --port {port} "
    "--base-gpu-id {device}"
)
SERVE_TEMPLATE = "{python} -m agentgym serve --model {model} --host {host} --port {port}"
_FIELDS = ("python", "model", "host", "port", "device", "index")


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class _Server:
    def __init__(self, index: int, device: str, port: int) -> None:
        self.index, self.device, self.port = index, device, port
        self.process: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None


class ServerFleet:
    """``count`` servers started from ``template`` and owned by this process.

    Args:
        count: servers to start (>= 1).
        model: the model the template names (``{model}``).
        template: the command line (see the module docstring).
        devices: per server, the ``{device}`` (round robin); default ``0 .. count-1``.
        host: where the servers listen and are reached.
        startup_timeout: seconds for a server to answer ``/health``.
        max_restarts: restarts of crashed servers allowed in all.
        on_restart: called with a server's URL after it was restarted and answers.
    """

    def __init__(
        self,
        count: int,
        *,
        model: str,
        template: str = SGLANG_TEMPLATE,
        devices: Sequence[str] = (),
        host: str = "127.0.0.1",
        startup_timeout: float = 900.0,
        max_restarts: int = 3,
        on_restart: Callable[[str], None] | None = None,
        poll_s: float = 1.0,
    ) -> None:
        if count < 1:
            raise ConfigError("launch", count, "must be >= 1", "pass --launch 1")
        try:
            template.format(**dict.fromkeys(_FIELDS, "x"))
        except (KeyError, IndexError, ValueError) as e:
            raise ConfigError(
                "launch_command",
                template,
                f"has a field other than {{{'}, {'.join(_FIELDS)}}} ({e})",
                f"write e.g. {SERVE_TEMPLATE!r}",
            ) from e
        if "{port}" not in template:
            raise ConfigError(
                "launch_command", template, "has no {port}", "pass the port the server listens on"
            )
        devices = [str(d) for d in devices] or [str(i) for i in range(count)]
        self.template, self.model, self.host = template, model, host
        self.startup_timeout, self.max_restarts = startup_timeout, max_restarts
        self.on_restart, self.poll_s = on_restart, poll_s
        self.restarts = 0
        self.failure: str | None = None
        """Why a crashed server was not restarted (None while all run)."""
        self._servers = [
            _Server(i, devices[i % len(devices)], _free_port(host)) for i in range(count)
        ]
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def urls(self) -> list[str]:
        return [f"http://{self.host}:{s.port}" for s in self._servers]

    @property
    def pids(self) -> list[int | None]:
        return [s.process.pid if s.process else None for s in self._servers]

    def command(self, index: int) -> list[str]:
        """Server ``index``'s command line."""
        server = self._servers[index]
        fields = {
            "python": sys.executable,
            "model": self.model,
            "host": self.host,
            "port": server.port,
            "device": server.device,
            "index": index,
        }
        return shlex.split(self.template.format(**fields))

    def start(self) -> list[str]:
        """Start every server, wait until each answers, watch them; returns their URLs."""
        atexit.register(self.close)
        try:
            for server in self._servers:
                self._spawn(server)
            for server in self._servers:
                self._wait_ready(server)
        except BaseException:
            self.close()
            raise
        self._watcher = threading.Thread(target=self._watch, name="agentgym-servers", daemon=True)
        self._watcher.start()
        return self.urls

    def _spawn(self, server: _Server) -> None:
        if server.log is None:
            server.log = tempfile.TemporaryFile()  # noqa: SIM115 (open while it runs)
        server.process = subprocess.Popen(
            self.command(server.index),
            stdout=server.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: killed whole, by us or by the reaper
        )
        reaper.watch(server.process.pid)

    def _wait_ready(self, server: _Server) -> None:
        assert server.process is not None
        url = self.urls[server.index]
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline and not self._closing.is_set():
            if server.process.poll() is not None:
                raise InfraError(
                    f"inference server {server.index} ({shlex.join(self.command(server.index))}) "
                    f"exited with code {server.process.returncode} before answering:\n"
                    f"{self._tail(server)}\nFix: check the command (--launch-command) and the "
                    "model."
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    return
            time.sleep(0.5)
        if not self._closing.is_set():
            raise InfraError(
                f"inference server {server.index} at {url} did not answer /health within "
                f"{self.startup_timeout:g} s. Fix: raise the startup timeout, or check its log:\n"
                f"{self._tail(server)}"
            )

    def _watch(self) -> None:
        while not self._closing.wait(self.poll_s):
            for server in self._servers:
                if self._closing.is_set() or server.process is None:
                    return
                if server.process.poll() is None:
                    continue
                self._restart(server)

    def _restart(self, server: _Server) -> None:
        assert server.process is not None
        code = server.process.returncode
        reaper.forget(server.process.pid)
        kill_group(server.process.pid)  # what it left behind
        if self.restarts >= self.max_restarts:
            self.failure = (
                f"inference server {server.index} at {self.urls[server.index]} exited with code "
                f"{code} after {self.restarts} restarts:\n{self._tail(server)}"
            )
            server.process = None
            return
        self.restarts += 1
        try:
            self._spawn(server)
            self._wait_ready(server)
        except InfraError as e:
            self.failure = str(e)
            return
        if self.on_restart is not None and not self._closing.is_set():
            self.on_restart(self.urls[server.index])

    def _tail(self, server: _Server, size: int = 3000) -> str:
        if server.log is None:
            return ""
        server.log.flush()
        server.log.seek(0)
        return server.log.read().decode(errors="replace")[-size:]

    def close(self, timeout: float = 30.0) -> None:
        """Stop every server (SIGTERM to its group, SIGKILL after ``timeout``)."""
        self._closing.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout)
        for server in self._servers:
            process = server.process
            if process is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout)
                kill_group(process.pid)
                process.wait()
                reaper.forget(process.pid)
            if server.log is not None:
                server.log.close()
                server.log = None
        with contextlib.suppress(ValueError):
            atexit.unregister(self.close)

    def __enter__(self) -> ServerFleet:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
