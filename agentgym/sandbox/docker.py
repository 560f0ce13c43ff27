"""The ``docker`` sandbox backend: one container per sandbox, commands run with ``docker exec``."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agentgym.core.errors import ConfigError, SandboxError
from agentgym.sandbox._dockerapi import DockerAPI, ExecStream
from agentgym.sandbox._files import HostFileMethods, WorkdirFiles
from agentgym.sandbox._output import CappedBuffer, allocation_failed
from agentgym.sandbox.base import Command, Limits, RunResult, check_timeout, prlimit_args

__all__ = ["DockerSandbox"]

# Runs the command under its rlimits, then kills whatever it left (every process of the run's
# user but this shell; pid 1 and the container's own processes run as root).
_WRAPPER = 'prlimit {limits} -- "$@"; rc=$?; kill -9 -1 2>/dev/null; exit $rc'
_KILL_ALL = "kill -9 -1 2>/dev/null; exit 0"
_RESET = "kill -9 -1 2>/dev/null; find /tmp -mindepth 1 -delete 2>/dev/null; exit 0"
_KILL_GRACE = 2.0


@dataclass(frozen=True)
class ContainerHandle:
    """A started container the sandbox owns, and how to give it back."""

    id: str
    uid: int
    """The user commands run as; unique per container when agentgym runs as root."""
    host_dir: str
    """The host folder mounted as the work dir."""
    remove: Callable[[], None]
    """Removes the container and its host folder (blocking; called in a thread)."""
    restart: Callable[[], None]
    """Kills every process and starts the container again (blocking)."""
    oom_kills: Callable[[], int | None]
    """How often the kernel's OOM killer has struck in the container (a cgroup file read;
    None where the daemon's cgroups cannot be read from here)."""


class DockerSandbox(HostFileMethods):
    """Runs commands in a Docker container started from agentgym's Python image.

    Isolated: the container's own pid, mount, IPC and UTS namespaces; no network (``network
    none``: only its own loopback); a read-only root filesystem from the image (nothing of the
    host's files but the work dir, a host folder bind-mounted read-write); a size-limited tmpfs
    ``/tmp``; memory, process-count and CPU limits on the whole container (cgroups) plus the
    per-run rlimits of ``Limits``; all capabilities dropped, ``no-new-privileges``, Docker's
    default seccomp profile. Commands run as an unprivileged user (a uid unique to the container
    when agentgym runs as root) and every process of a run is killed when it ends or times out.

    Not isolated: the kernel is the host's (containers are not VMs), disk use of the work dir
    (only the per-file size limit), and the daemon itself runs as root on the host. The work dir
    is a host folder, so the daemon must be on this machine (``DOCKER_HOST=unix://...``).
    Runs in one sandbox are serialised. Get sandboxes from a ``DockerPool``.
    """

    backend = "docker"

    def __init__(
        self,
        handle: ContainerHandle,
        api: DockerAPI,
        *,
        workdir: str,
        limits: Limits,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.limits, self.workdir, self._handle, self._api = limits, workdir, handle, api
        self.id = handle.id[:12]
        owner = (handle.uid, handle.uid) if os.geteuid() == 0 else None
        self._files = WorkdirFiles(handle.host_dir, workdir, owner)
        self._env = dict(env or {})
        self._user = f"{handle.uid}:{handle.uid}"
        self._lock = asyncio.Lock()
        self._closed = False
        self._nproc = os.geteuid() == 0  # NPROC is per uid: only a container's own uid is safe

    @property
    def container_id(self) -> str:
        return self._handle.id

    def _argv(self, cmd: Command, limits: Limits, timeout: float) -> list[str]:
        if isinstance(cmd, str):
            argv = ["/bin/sh", "-c", cmd]
        else:
            argv = list(cmd)
            if not argv or not all(isinstance(a, str) for a in argv):
                raise ConfigError(
                    "cmd",
                    cmd,
                    "must be a str or a non-empty list of str",
                    "pass e.g. ['python3', 'main.py'] or 'python3 main.py'",
                )
        rlimits = limits.rlimits(timeout)
        if not self._nproc:
            rlimits.pop("nproc", None)  # the container's pids limit still applies
        wrapper = _WRAPPER.format(limits=" ".join(prlimit_args(rlimits)))
        return ["/bin/sh", "-c", wrapper, "sh", *argv]

    def _cwd(self, cwd: str | None) -> str:
        if not cwd:
            return self.workdir
        return cwd if cwd.startswith("/") else f"{self.workdir}/{cwd}"

    async def run(
        self,
        cmd: Command,
        *,
        stdin: str | bytes | None = None,
        timeout: float,
        limits: Limits | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``cmd`` in the container; see ``Sandbox.run``."""
        self._check_open()
        limits = self.limits if limits is None else limits
        timeout = check_timeout(timeout)
        argv = self._argv(cmd, limits, timeout)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        full_env = {
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "AGENTGYM_SANDBOX": self.id,
            **self._env,
            **(env or {}),
        }
        async with self._lock:
            return await self._run_locked(argv, data, timeout, limits, self._cwd(cwd), full_env)

    async def _run_locked(
        self,
        argv: list[str],
        stdin: bytes | None,
        timeout: float,
        limits: Limits,
        cwd: str,
        env: dict[str, str],
    ) -> RunResult:
        out, err = CappedBuffer(limits.output), CappedBuffer(limits.output)
        oom_before = self._handle.oom_kills()
        started = time.monotonic()
        exec_id = await self._api.exec_create(
            self._handle.id, argv, user=self._user, workdir=cwd, env=env, stdin=stdin is not None
        )
        stream = await self._api.exec_stream(exec_id, stdin, out, err)
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                await stream.pump()
        except TimeoutError:
            timed_out = True
            await self._kill_run(stream)
        finally:
            stream.close()
        code = await self._exit_code(exec_id)
        oom = not timed_out and code != 0 and allocation_failed(err.tail)
        if not (oom or timed_out) and code != 0 and oom_before is not None:
            oom = (self._handle.oom_kills() or 0) > oom_before  # the cgroup's OOM killer struck
        return RunResult(
            exit_code=code,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            oom_killed=oom,
            duration=time.monotonic() - started,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
        )

    async def _kill_run(self, stream: ExecStream) -> None:
        """Kill every process of the run; restart the container if even that cannot run."""
        try:
            async with asyncio.timeout(_KILL_GRACE):
                await self._kill_all()
                await stream.pump()
            return
        except (TimeoutError, SandboxError):
            pass
        await asyncio.to_thread(self._handle.restart)

    async def _kill_all(self, script: str = _KILL_ALL) -> None:
        """Run ``script`` as the sandbox user, detached, and wait until it has finished (a
        ``kill -1`` still pending would hit the next run)."""
        exec_id = await self._api.exec_create(
            self._handle.id,
            ["/bin/sh", "-c", script],
            user=self._user,
            workdir="/",
            env={},
            stdin=False,
        )
        await self._api.exec_start_detached(exec_id)
        await self._exit_code(exec_id)

    async def _exit_code(self, exec_id: str) -> int:
        # The stream can end a moment before the daemon records the exit code.
        for _ in range(100):
            info = await self._api.exec_inspect(exec_id)
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            await asyncio.sleep(0.01)
        return 137

    async def reset(self) -> None:
        """Kill every process of the sandbox user, empty ``/tmp`` and the work dir."""
        self._check_open()
        async with self._lock:
            try:
                await self._kill_all(_RESET)
            except SandboxError:
                await asyncio.to_thread(self._handle.restart)  # also empties the /tmp tmpfs
            await asyncio.to_thread(self._files.clear)

    async def close(self) -> None:
        """Remove the container and its work dir (containers are never reused)."""
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            await asyncio.to_thread(self._handle.remove)

    def remove_now(self) -> None:
        """Remove the container at once, from any thread and without waiting for a run in
        progress (it then fails with ``SandboxError``); blocking. ``close`` is then a no-op."""
        self._closed = True
        self._handle.remove()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"docker sandbox {self.id} is closed")

    async def __aenter__(self) -> DockerSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
