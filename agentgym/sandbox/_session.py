"""This process's sandbox folder and the reaper that cleans up after it, however it ends.

Every sandbox of a process keeps its host folders under one session folder,
``$TMPDIR/agentgym-<pid>-<start time>-XXXX``, and every container it makes carries the label
``agentgym.owner=<host>:<pid>:<start time>``. On first use a small reaper process starts; its
stdin is a pipe whose write end only this process holds, so it wakes when this process exits,
even by SIGKILL, and removes the containers and the folder. ``cleanup_stale()`` does the same
for owners that are gone when even the reaper could not run.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
import threading
from pathlib import Path

__all__ = [
    "OWNER_LABEL",
    "cleanup_stale",
    "owner",
    "owner_alive",
    "session_folder",
    "stale_folders",
]

OWNER_LABEL = "agentgym.owner"
_PREFIX = "agentgym-"
_REAPER_SOURCE = Path(__file__).with_name("_reaper.py").read_text()
_lock = threading.Lock()
_state: dict[str, object] = {"pid": -1, "folder": ""}


def _start_time(pid: int) -> str:
    """The kernel's start time of ``pid`` (tells a pid apart from a later one reusing it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner(pid: int | None = None) -> str:
    """``<host>:<pid>:<start time>`` of this process (or ``pid``)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def owner_alive(label: str) -> bool:
    """Whether the process an owner label names still runs (other hosts' are taken as alive)."""
    host, _, rest = label.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    return _start_time(int(pid)) == started != ""


def session_folder() -> str:
    """This process's folder for sandbox files; the first call starts the reaper."""
    with _lock:
        if _state["pid"] != os.getpid():  # first use in this process, or in a forked child
            pid = os.getpid()
            folder = tempfile.mkdtemp(prefix=f"{_PREFIX}{pid}-{_start_time(pid)}-")
            os.chmod(folder, 0o711)  # sandbox users pass through to their own folders only
            _start_reaper(folder)
            _state.update(pid=pid, folder=folder)
        return str(_state["folder"])


def _start_reaper(folder: str) -> None:
    # posix_spawn rather than Popen, which would warn at exit that its child still runs; the
    # pipe's write end is close-on-exec, so no other child of ours holds it open.
    read_end, write_end = os.pipe()
    try:
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-c", _REAPER_SOURCE, f"{OWNER_LABEL}={owner()}", folder],
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0)],
            setsid=True,
        )
    finally:
        os.close(read_end)
    _state["pipe"] = write_end  # held, never written: its closing is the signal


def stale_folders() -> list[str]:
    """Session folders in the temp dir whose process is gone."""
    found = []
    with contextlib.suppress(OSError), os.scandir(tempfile.gettempdir()) as entries:
        for entry in entries:
            parts = entry.name[len(_PREFIX) :].split("-")
            if not entry.name.startswith(_PREFIX) or len(parts) < 3 or not parts[0].isdigit():
                continue
            label = f"{socket.gethostname()}:{parts[0]}:{parts[1]}"
            if entry.is_dir(follow_symlinks=False) and not owner_alive(label):
                found.append(entry.path)
    return found


def cleanup_stale(*, everything: bool = False) -> int:
    """Remove what sandboxes of dead processes left: containers and host folders.

    ``everything=True`` also removes the containers of live processes (not their folders).
    Containers of other machines sharing the daemon are left alone unless ``everything``.
    Returns how many containers and folders were removed.
    """
    import shutil

    removed = 0
    for folder in stale_folders():
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    try:
        import docker

        client = docker.from_env(timeout=60)
        # ignore_removed: a container removed while listing (a pool closing, a reaper) would
        # otherwise raise NotFound and skip every other container.
        containers = client.containers.list(
            all=True, filters={"label": OWNER_LABEL}, ignore_removed=True
        )
    except Exception:  # no SDK or no daemon: no containers to clean
        return removed
    for container in containers:
        if everything or not owner_alive(container.labels.get(OWNER_LABEL, "")):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
                removed += 1
    return removed
