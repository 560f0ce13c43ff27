"""The reaper: no child process group outlives the process that launched it, SIGKILL included.

Its users start each child as the leader of a new process group: the web envs' browsers
(Playwright's Chromium, whose renderers, GPU and utility processes join that group,
``agentgym.envs.web.browser``) and the inference servers a run launches
(``agentgym.recipes.servers``). A watchdog process (this file run as a script with the agent's
pid), started once per agent process in a session of its own, holds the read end of a pipe from
the agent: the agent writes ``+<pgid>`` when a group starts and ``-<pgid>`` when it closed one.
When the pipe reaches end-of-file or the agent's pid is no longer the watchdog's parent (the
agent exited, crashed, or was killed with SIGKILL, which no handler in the agent can catch), the
watchdog SIGKILLs every process group still registered and exits. Standard library only: the
watchdog runs this file without importing agentgym.

Linux and macOS (POSIX process groups); on other systems ``Reaper.watch`` does nothing.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading

__all__ = ["Reaper", "kill_group", "reaper"]

_POLL_S = 0.5


def kill_group(pgid: int) -> None:
    """SIGKILL process group ``pgid``; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class Reaper:
    """The agent side: starts the watchdog on first use and tells it which groups to kill."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def _ensure(self) -> subprocess.Popen[bytes] | None:
        if self._process is not None and self._process.poll() is None:
            return self._process
        if not hasattr(os, "killpg"):
            return None
        # The file as a script (stdlib only, isolated mode): it starts in milliseconds, without
        # importing agentgym, so it is watching before the agent can die.
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", __file__, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the agent's group must not kill it first
        )
        return self._process

    def _send(self, line: str) -> None:
        with self._lock:
            process = self._ensure()
            if process is None or process.stdin is None:
                return
            with contextlib.suppress(BrokenPipeError, OSError):
                process.stdin.write(line.encode() + b"\n")
                process.stdin.flush()

    def watch(self, pgid: int) -> None:
        """Kill group ``pgid`` if this process dies before calling ``forget(pgid)``."""
        self._send(f"+{pgid}")

    def forget(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    @property
    def pid(self) -> int | None:
        """The watchdog's pid (``None`` before the first ``watch``)."""
        return None if self._process is None else self._process.pid

    def _after_fork(self) -> None:
        # A forked child is a different agent: it starts its own watchdog when it needs one.
        self._lock = threading.Lock()
        self._process = None


reaper = Reaper()
"""The process-wide reaper."""

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=reaper._after_fork)


def _apply(line: bytes, groups: set[int]) -> None:
    text = line.decode(errors="replace").strip()
    if len(text) < 2 or text[0] not in "+-" or not text[1:].isdigit():
        return
    pgid = int(text[1:])
    if text[0] == "+":
        groups.add(pgid)
    else:
        groups.discard(pgid)


def watch_parent(parent: int, fd: int = 0) -> None:
    """The watchdog's loop: read commands on ``fd`` until the parent is gone, then kill."""
    groups: set[int] = set()
    buffer = b""
    open_ = True
    while open_:
        alive = os.getppid() == parent
        # Once the parent is gone, read what it wrote before dying (without waiting), then kill.
        ready, _, _ = select.select([fd], [], [], _POLL_S if alive else 0)
        if not ready:
            if alive:
                continue
            break
        chunk = os.read(fd, 4096)
        open_ = bool(chunk)
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            _apply(line, groups)
    _apply(buffer, groups)
    for pgid in groups:
        kill_group(pgid)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the agent's group may be sent SIGTERM
    watch_parent(int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
