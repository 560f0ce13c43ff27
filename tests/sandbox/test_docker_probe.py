"""The Docker probe of the sandbox choice, against a stand-in daemon on a unix socket."""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentgym.sandbox import selection


class _FakeDaemon:
    """Answers ``GET path`` with ``statuses[path]`` (404 when missing), or never (``hang``)."""

    def __init__(self, statuses: dict[str, int], hang: bool = False) -> None:
        self.folder = tempfile.mkdtemp(prefix="dk-", dir="/tmp")  # short: sun_path is 108 bytes
        self.path = f"{self.folder}/docker.sock"
        self.statuses, self.hang = statuses, hang
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(8)
        self.server.settimeout(0.1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            with conn:
                request = conn.recv(4096).decode()
                if self.hang:
                    self.stop.wait(10)
                    continue
                path = request.split()[1]
                status = self.statuses.get(path, 404)
                conn.sendall(f"HTTP/1.0 {status} X\r\nContent-Length: 0\r\n\r\n".encode())

    def close(self) -> None:
        if self.stop.is_set():
            return
        self.stop.set()
        self.thread.join()
        self.server.close()
        Path(self.path).unlink()
        Path(self.folder).rmdir()


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., _FakeDaemon]]:
    monkeypatch.setattr(selection, "_docker_seen", {})
    made: list[_FakeDaemon] = []

    def start(statuses: dict[str, int], hang: bool = False) -> _FakeDaemon:
        fake = _FakeDaemon(statuses, hang)
        made.append(fake)
        monkeypatch.setenv("DOCKER_HOST", f"unix://{fake.path}")
        return fake

    yield start
    for fake in made:
        fake.close()


IMAGE = "agentgym/python:test"
PING = {"/_ping": 200}


def test_docker_probe_needs_the_daemon_and_the_image(daemon: Callable[..., _FakeDaemon]) -> None:
    pytest.importorskip("docker")
    daemon({**PING, f"/images/{IMAGE}/json": 200})
    assert selection.why_not_docker(IMAGE) is None
    assert selection.why_not_docker(None) is None
    missing = selection.why_not_docker("agentgym/python:other")
    assert "no image agentgym/python:other" in (missing or "")


def test_docker_probe_reports_no_daemon_and_a_remote_one(
    daemon: Callable[..., _FakeDaemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("docker")
    fake = daemon(PING)
    fake.close()  # the socket file is gone
    assert "no Docker daemon answers" in (selection.why_not_docker(IMAGE) or "")
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2375")
    assert "unix" in (selection.why_not_docker(IMAGE) or "")


def test_docker_probe_gives_up_on_a_daemon_that_hangs(
    daemon: Callable[..., _FakeDaemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("docker")
    monkeypatch.setattr(selection, "DOCKER_PROBE_TIMEOUT", 0.3)
    daemon(PING, hang=True)
    started = time.monotonic()
    why = selection.why_not_docker(IMAGE)
    assert "no Docker daemon answers" in (why or "")
    assert time.monotonic() - started < 5  # returned on its deadline, not the daemon's 10 s


def test_docker_probe_without_the_sdk_names_the_extra(
    daemon: Callable[..., _FakeDaemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    daemon({**PING, f"/images/{IMAGE}/json": 200})
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert "pip install 'agentgymnasium[docker]'" in (selection.why_not_docker(IMAGE) or "")


def test_docker_probe_remembers_a_yes_and_a_no_for_a_while(
    daemon: Callable[..., _FakeDaemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("docker")
    fake = daemon({**PING, f"/images/{IMAGE}/json": 200})
    assert selection.why_not_docker(IMAGE) is None
    fake.statuses = {}  # the daemon loses the image: a yes is kept for the process
    assert selection.why_not_docker(IMAGE) is None
    assert selection.why_not_docker("other:tag") is not None
    fake.statuses = {**PING, "/images/other:tag/json": 200}
    assert selection.why_not_docker("other:tag") is not None  # a no is kept NEGATIVE_TTL s
    monkeypatch.setattr(selection, "NEGATIVE_TTL", 0.0)
    assert selection.why_not_docker("other:tag") is None
