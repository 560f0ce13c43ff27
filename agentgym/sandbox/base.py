"""The ``Sandbox`` protocol every backend implements, its ``Limits`` and its ``RunResult``.

A run's outcome is data: a crash, a timeout, a memory bomb or a flood of output all come back as
a ``RunResult``. Only programmer errors raise (``ConfigError`` for a bad limit or timeout,
``SandboxFileError`` for a bad path); a backend that breaks underneath raises ``SandboxError``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentgym.core.errors import ConfigError

__all__ = ["Command", "Limits", "RunResult", "Sandbox", "check_timeout", "prlimit_args"]

Command = str | Sequence[str]
"""A shell command line (run by ``/bin/sh -c``) or an argv list (run directly)."""

MiB = 1 << 20


def _check_positive(name: str, value: int | None, *, minimum: int = 1) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(
            f"Limits.{name}",
            value,
            f"must be an int >= {minimum} or None (no limit)",
            f"pass e.g. Limits({name}={max(minimum, 1) * 64})",
        )


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one run; ``None`` means unlimited (except ``output``).

    The limits are rlimits of every process the run starts, so they bound what one process can
    take; ``processes`` bounds how many there are at once.
    """

    memory: int | None = 1024 * MiB
    """Address space of each process, in bytes (``RLIMIT_AS``); past it allocations fail."""
    processes: int | None = 64
    """Processes and threads the run may have at once (``RLIMIT_NPROC``)."""
    file_size: int | None = 64 * MiB
    """Largest file a process may write, in bytes (``RLIMIT_FSIZE``)."""
    cpu_seconds: int | None = None
    """CPU time of each process (``RLIMIT_CPU``); ``None`` derives it from the run's timeout."""
    output: int = 64 * 1024
    """Bytes of stdout and of stderr each that the result keeps; the rest is read and dropped."""

    def __post_init__(self) -> None:
        _check_positive("memory", self.memory, minimum=16 * MiB)
        _check_positive("processes", self.processes)
        _check_positive("file_size", self.file_size)
        _check_positive("cpu_seconds", self.cpu_seconds)
        if isinstance(self.output, bool) or not isinstance(self.output, int) or self.output < 0:
            raise ConfigError(
                "Limits.output",
                self.output,
                "must be an int >= 0",
                "pass the number of bytes to keep, e.g. Limits(output=65536)",
            )

    def rlimits(self, timeout: float) -> dict[str, int]:
        """The rlimits to apply, by ``prlimit`` long option name, for a run of ``timeout`` s."""
        cpu = self.cpu_seconds if self.cpu_seconds is not None else math.ceil(timeout) + 1
        values = {
            "as": self.memory,
            "nproc": self.processes,
            "fsize": self.file_size,
            "cpu": cpu,
            "core": 0,
        }
        return {k: v for k, v in values.items() if v is not None}


def prlimit_args(limits: dict[str, int]) -> list[str]:
    """``prlimit`` options setting each limit soft and hard."""
    return [f"--{name}={value}:{value}" for name, value in limits.items()]


def check_timeout(timeout: float) -> float:
    """Validate a run's ``timeout``; return it as a float."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not (0 < timeout < math.inf)
    ):
        raise ConfigError(
            "timeout", timeout, "must be a finite number of seconds > 0", "pass e.g. timeout=10.0"
        )
    return float(timeout)


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run did. Killed-by-signal runs report ``exit_code`` 128 + the signal, as shells do."""

    exit_code: int
    stdout: str
    """The first ``Limits.output`` bytes of stdout, decoded as UTF-8 (bad bytes replaced)."""
    stderr: str
    timed_out: bool = False
    """The run passed its timeout and every process of it was killed."""
    oom_killed: bool = False
    """The run hit a memory limit: an allocation failed under ``Limits.memory`` (the last line of
    stderr says so, e.g. ``MemoryError``), or the container's OOM killer struck (docker)."""
    duration: float = 0.0
    """Wall-clock seconds from start to the last process ending."""
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def truncated(self) -> bool:
        """Whether stdout or stderr was longer than the output limit."""
        return self.stdout_truncated or self.stderr_truncated

    @property
    def ok(self) -> bool:
        """Exit code 0 within the timeout."""
        return self.exit_code == 0 and not self.timed_out


@runtime_checkable
class Sandbox(Protocol):
    """A place to run untrusted commands, with one writable work dir.

    Paths given to the file methods are relative to ``workdir`` or absolute under it; symlinks
    are followed only while they stay inside it. Runs in one sandbox share the work dir (and
    ``/tmp``) and are serialised; every process a run starts ends when the run ends.
    Each backend's docstring says what is isolated and what is not.
    """

    backend: str
    """``"local"`` or ``"docker"``."""
    id: str
    """A short id, unique on this machine, for logs (``$AGENTGYM_SANDBOX`` inside)."""
    workdir: str
    """The work dir's path as commands inside the sandbox see it."""
    limits: Limits
    """Limits of runs that pass none."""

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
        """Run ``cmd`` in the work dir (or ``cwd`` relative to it) and return what it did."""
        ...

    async def read_file(self, path: str) -> bytes:
        """The bytes of a file in the work dir; ``SandboxFileError`` if it is not a file there."""
        ...

    async def write_file(self, path: str, data: str | bytes, *, mode: int = 0o644) -> None:
        """Create or replace a file in the work dir, creating missing parent dirs."""
        ...

    async def upload(self, local_dir: str | os.PathLike[str], dest: str = ".") -> None:
        """Copy a host folder's contents into ``dest`` in the work dir (symlinks as symlinks)."""
        ...

    async def reset(self) -> None:
        """End every process, empty the work dir and ``/tmp``: the state of a fresh sandbox."""
        ...

    async def close(self) -> None:
        """End every process and free everything the sandbox holds; calling it again is a no-op."""
        ...
