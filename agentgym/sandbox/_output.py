"""Bounded capture of a run's output, and reading an allocation failure off its stderr."""

from __future__ import annotations

__all__ = ["CappedBuffer", "allocation_failed", "signal_exit_code"]

_TAIL = 512
# Last lines that programs print when an allocation fails under RLIMIT_AS.
_OOM_MARKERS = (b"memoryerror", b"cannot allocate memory", b"std::bad_alloc", b"out of memory")


class CappedBuffer:
    """Keeps the first ``cap`` bytes fed to it and the last few hundred; counts the rest."""

    __slots__ = ("cap", "data", "tail", "total")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.tail = b""
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.tail = (self.tail + chunk[-_TAIL:])[-_TAIL:]

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def allocation_failed(stderr_tail: bytes) -> bool:
    """Whether the last line of stderr reports a failed allocation (``MemoryError`` and kin)."""
    lines = stderr_tail.strip().lower().splitlines()
    return bool(lines) and any(marker in lines[-1] for marker in _OOM_MARKERS)


def signal_exit_code(returncode: int) -> int:
    """Map Python's ``-N`` for "killed by signal N" to the shell's ``128 + N``."""
    return 128 - returncode if returncode < 0 else returncode
