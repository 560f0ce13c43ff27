"""Fixtures for the MCP env's tests: the toy server (stdio and HTTP) and child-process listing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TOY_SERVER = str(Path(__file__).with_name("toy_server.py"))
STORE_MODULE = "agentgym.envs.mcp.servers.store"


def toy_stdio() -> dict[str, Any]:
    return {"command": sys.executable, "args": [TOY_SERVER]}


def children(pattern: str = "") -> list[int]:
    """Live (non-zombie) child processes of this one whose command line contains ``pattern``
    (the servers the HTTP fixtures started are left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == os.getpid() and state != "Z" and pattern in cmdline and "--http" not in cmdline:
            found.append(int(entry.name))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_http(argv: list[str]) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [*argv, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(300):  # up to 30 s for the server to bind on a loaded machine
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if process.poll() is not None:
                    pytest.fail(f"{argv} --http exited with {process.returncode}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def toy_url() -> Iterator[str]:
    yield from _serve_http([sys.executable, TOY_SERVER])


@pytest.fixture(scope="module")
def store_url() -> Iterator[str]:
    yield from _serve_http([sys.executable, "-m", STORE_MODULE])


@pytest.fixture
def toy() -> dict[str, Any]:
    """The toy server over stdio, as a server config dict."""
    return toy_stdio()


@pytest.fixture
def child_pids() -> Any:
    """``child_pids(pattern)``: this process's live children whose command line has it."""
    return children
