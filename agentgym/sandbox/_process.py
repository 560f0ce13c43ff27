"""Host side of the local sandbox's helper: start it, hand it commands, collect what they did."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentgym.core.errors import SandboxError, SandboxUnavailable
from agentgym.sandbox._output import CappedBuffer, allocation_failed, signal_exit_code
from agentgym.sandbox.base import RunResult

__all__ = [
    "HELPER_ARGV",
    "HelperProcess",
    "count_processes_of",
    "helper_python",
    "kill_uid",
    "live_pids_of",
    "random_uid",
]

HELPER_SOURCE = (Path(__file__).with_name("_helper.py")).read_text()
HELPER_ARGV = ["-I", "-S", "-c", "import sys; exec(sys.stdin.read())"]
"""Interpreter options that run the helper, whose source comes on stdin (a short cmdline)."""
_KILL_GRACE = 2.0  # seconds a killed run gets to report before its helper is killed too
_DRAIN_GRACE = 1.0  # seconds to wait for pipes that processes outside our reach hold open
_Drain = tuple[asyncio.BaseTransport, "asyncio.Future[None]"]
_UID_MIN, _UID_MAX = 200_000, 2_000_000_000  # sandbox uids when root; no account uses these
_SPAWNER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentgym-sandbox-spawn")


class _Sink(asyncio.Protocol):
    """Feeds a pipe's bytes into a ``CappedBuffer`` as they arrive."""

    def __init__(self, buf: CappedBuffer, done: asyncio.Future[None]) -> None:
        self.buf, self.done = buf, done

    def data_received(self, data: bytes) -> None:
        self.buf.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


class HelperProcess:
    """A running ``_helper.py`` (inside bubblewrap, or a bare process) and its control socket."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, errlog: Any) -> None:
        self.proc, self.sock, self._errlog = proc, sock, errlog
        self._next_id = 0

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        mode: str,
        user: int | None,
        cwd: str,
        env: Mapping[str, str],
        start_timeout: float = 30.0,
    ) -> HelperProcess:
        """Start ``argv + [FD, mode]`` with the helper's source on stdin; wait until it is ready."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        errlog = tempfile.TemporaryFile()  # noqa: SIM115 - the helper owns it until it is killed

        def popen() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [*argv, str(child.fileno()), mode],
                pass_fds=[child.fileno()],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errlog,
                start_new_session=True,
                cwd=cwd,
                env=dict(env),
                user=user,
                group=user,
                extra_groups=[] if user is not None else None,
            )

        try:
            # bwrap --die-with-parent fires when the *thread* that started it ends: start it
            # from one that lives as long as the process, not from a short-lived caller's.
            proc = await asyncio.wrap_future(_SPAWNER.submit(popen))
        except OSError as e:
            parent.close()
            raise SandboxError(f"cannot start the sandbox helper {argv[0]!r}: {e}") from e
        finally:
            child.close()
        with contextlib.suppress(OSError):  # if it died at once, the ready check below says why
            proc.stdin.write(HELPER_SOURCE.encode())  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        parent.setblocking(False)
        helper = cls(proc, parent, errlog)
        try:
            async with asyncio.timeout(start_timeout):
                ready = await helper._recv()
        except TimeoutError:
            ready = None
        if not ready or not ready.get("ready"):
            why = helper.stderr_text() or "it exited without a word"
            helper.kill()
            raise SandboxError(f"the sandbox did not start ({' '.join(argv[:1])}): {why}")
        return helper

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and self.sock.fileno() != -1

    def stderr_text(self) -> str:
        self._errlog.seek(0)
        return self._errlog.read(4096).decode(errors="replace").strip()

    async def _recv(self) -> dict[str, Any] | None:
        """The next message from the helper, or None once it has gone."""
        loop = asyncio.get_running_loop()
        try:
            data = await loop.sock_recv(self.sock, 1 << 16)
        except OSError:
            return None
        return json.loads(data) if data else None

    def _send(self, header: dict[str, Any], fds: Sequence[int] = ()) -> bool:
        try:
            socket.send_fds(self.sock, [json.dumps(header).encode()], list(fds))
        except OSError:
            return False
        return True

    async def execute(
        self, request: dict[str, Any], stdin: bytes | None, timeout: float, cap: int
    ) -> RunResult:
        """Run one command (``request``: argv, env, cwd, rlimits) and collect its result."""
        self._next_id += 1
        rid = self._next_id
        out, err = CappedBuffer(cap), CappedBuffer(cap)
        started = time.monotonic()
        drains, stdin_w = await self._send_run(rid, request, stdin, out, err)
        if stdin_w is not None and stdin:
            stdin_w.write(stdin)
        if stdin_w is not None:
            stdin_w.close()
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                status = await self._status(rid, err)
        except TimeoutError:
            timed_out = True
            status = await self._kill_run(rid, err)
        await _drain(drains)
        code = signal_exit_code(status)
        return RunResult(
            exit_code=code,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            oom_killed=not timed_out and code != 0 and allocation_failed(err.tail),
            duration=time.monotonic() - started,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
        )

    async def _send_run(
        self,
        rid: int,
        request: dict[str, Any],
        stdin: bytes | None,
        out: CappedBuffer,
        err: CappedBuffer,
    ) -> tuple[list[_Drain], asyncio.WriteTransport | None]:
        loop = asyncio.get_running_loop()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        memfd = os.memfd_create("agentgym-run", os.MFD_CLOEXEC)
        with open(os.dup(memfd), "wb") as f:
            f.write(json.dumps(request).encode())
        mine = [out_w, err_w, memfd]
        stdin_w = None
        if stdin is not None:
            in_r, in_fd = os.pipe()
            mine.append(in_r)
        sent = self._send({"op": "run", "id": rid}, mine)
        for fd in mine:
            os.close(fd)
        drains = [await _read_pipe(out_r, out), await _read_pipe(err_r, err)]
        if stdin is not None:
            stdin_w, _ = await loop.connect_write_pipe(
                asyncio.Protocol, os.fdopen(in_fd, "wb", buffering=0)
            )
        if not sent:
            err.feed(b"sandbox: the sandbox helper has gone; the command did not run\n")
        return drains, stdin_w

    async def _status(self, rid: int, err: CappedBuffer) -> int:
        """Wait for the run's exit status; a helper that died (or was killed) reports SIGKILL."""
        while True:
            msg = await self._recv()
            if msg is None:
                self.kill()
                return -signal.SIGKILL
            if msg.get("id") != rid:
                continue
            if "status" in msg:
                return int(msg["status"])
            if "error" in msg:
                err.feed(f"sandbox: {msg['error']}\n".encode())
                return 126

    async def _kill_run(self, rid: int, err: CappedBuffer) -> int:
        self._send({"op": "kill"})
        try:
            async with asyncio.timeout(_KILL_GRACE):
                return await self._status(rid, err)
        except TimeoutError:
            self.kill()
            return -signal.SIGKILL

    def kill(self) -> None:
        """Kill the helper now (and, inside bubblewrap, every process of the sandbox)."""
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self._errlog.close()

    async def close(self) -> None:
        """Let the helper kill its processes and exit; kill it if it does not."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(self.proc.wait, _KILL_GRACE)
        self.kill()


async def _read_pipe(fd: int, buf: CappedBuffer) -> _Drain:
    """Feed what comes out of pipe ``fd`` into ``buf``; the future resolves at EOF."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    transport, _ = await loop.connect_read_pipe(
        functools.partial(_Sink, buf, done), os.fdopen(fd, "rb", buffering=0)
    )
    return transport, done


async def _drain(drains: list[_Drain]) -> None:
    """Wait for the output pipes to close; give up on ones a stray process still holds."""
    pending = [done for _, done in drains]
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_DRAIN_GRACE):
            await asyncio.gather(*pending)
    for transport, _ in drains:
        transport.close()
    await asyncio.sleep(0)


def _reachable_by_others(path: str) -> bool:
    """Whether an unrelated user can execute ``path`` (every parent folder searchable)."""
    path = os.path.realpath(path)
    parts = path.split("/")
    for i in range(2, len(parts) + 1):
        if not os.stat("/".join(parts[:i]) or "/").st_mode & stat.S_IXOTH:
            return False
    return True


def helper_python(drop: bool) -> str:
    """An interpreter the sandbox user may run: ours if reachable, else the system's."""
    for candidate in (
        os.path.realpath(sys.executable),
        "/usr/bin/python3",
        "/usr/local/bin/python3",
    ):
        if os.path.exists(candidate) and (not drop or _reachable_by_others(candidate)):
            return os.path.realpath(candidate)
    raise SandboxUnavailable(
        f"no Python that an unprivileged user may run for the sandbox helper (ours, "
        f"{sys.executable}, is in a private folder). Fix: apt-get install python3-minimal"
    )


def live_pids_of(uid: int) -> list[int]:
    """Host pids of ``uid`` that are not zombies."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                    pids.append(int(name))
        except (OSError, IndexError):
            pass
    return pids


def kill_uid(uid: int) -> None:
    """SIGKILL every process of a sandbox's own uid until none is left (a fork bomb races)."""
    for _ in range(200):
        pids = live_pids_of(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def count_processes_of(uid: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat(f"/proc/{name}").st_uid == uid
    return count


def random_uid() -> int:
    """An unprivileged uid for one sandbox (no account on a normal system uses this range)."""
    return random.randrange(_UID_MIN, _UID_MAX)
