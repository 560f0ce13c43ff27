"""The bubblewrap command line of a local sandbox, and whether bubblewrap works here at all."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence

from agentgym.sandbox._process import random_uid

__all__ = ["bwrap_argv", "bwrap_usable", "record_failure", "why_not_bwrap"]

# What of the host's /etc the dynamic linker and the usual tools need; nothing else is bound.
_ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
)
_failure: list[str] = []  # why bubblewrap failed to start a sandbox in this process, if it did


@functools.cache
def _help() -> str:
    exe = shutil.which("bwrap")
    if exe is None:
        return ""
    return subprocess.run([exe, "--help"], capture_output=True, text=True, check=False).stdout


def _top_level_links() -> list[str]:
    """Options recreating /bin, /lib, ... as the host has them (on Debian: symlinks into /usr)."""
    argv = []
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    return argv


@functools.cache
def _probe() -> str | None:
    """Why bubblewrap cannot make a sandbox here (no user namespaces, say), or None if it can."""
    if not _help():
        return "bubblewrap (bwrap) is not installed"
    user = random_uid() if os.geteuid() == 0 else None
    argv = [
        "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--ro-bind",
        "/usr",
        "/usr",
        *_top_level_links(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "/usr/bin/true",
    ]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap did not run: {e}"
    return None if done.returncode == 0 else f"bwrap failed: {done.stderr.strip()[:300]}"


def bwrap_usable() -> bool:
    """Whether bubblewrap is installed and can make sandboxes here (checked once a process)."""
    return why_not_bwrap() is None


def why_not_bwrap() -> str | None:
    """Why bubblewrap cannot make sandboxes here (or failed to), or None if it can."""
    return _failure[0] if _failure else _probe()


def record_failure(why: str) -> None:
    """Remember that bubblewrap failed to start a sandbox: later ones refuse to start."""
    if not _failure:
        _failure.append(why)


def visible(folders: Sequence[str], binds: Sequence[str]) -> list[str]:
    """The existing ``folders`` that lie inside one of ``binds`` (what a sandbox would see)."""
    out = []
    for folder in folders:
        real = os.path.realpath(folder)
        inside = any(
            real == os.path.realpath(b) or real.startswith(os.path.realpath(b) + "/") for b in binds
        )
        if inside and os.path.isdir(real):
            out.append(real)
    return out


def bwrap_argv(
    *,
    host_dir: str,
    workdir: str,
    ro_binds: Sequence[str],
    tmp_size: int,
    path: str,
    hide: Sequence[str] = (),
) -> list[str]:
    """The bwrap prefix of a sandbox whose work dir is ``host_dir``, seen inside as ``workdir``.

    New user, pid, network, IPC, UTS and cgroup namespaces; ``/usr`` and ``ro_binds``
    read-only, except the folders of ``hide`` inside them, each an empty tmpfs; a private tmpfs
    ``/tmp`` of ``tmp_size`` bytes; dies with its parent; its own session (no TIOCSTI into our
    terminal).
    """
    features = _help()
    argv = [
        "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
        *_top_level_links(),
    ]
    if "--disable-userns" in features:
        argv.append("--disable-userns")  # no nested user namespaces: less kernel to attack
    for etc in _ETC:
        argv += ["--ro-bind-try", etc, etc]
    for bind in ro_binds:
        argv += ["--ro-bind", bind, bind]
    for folder in visible(hide, ["/usr", *ro_binds]):
        argv += ["--tmpfs", folder]  # mounted over: the folder is there, empty
    if "--size" in features:
        argv += ["--size", str(tmp_size)]
    argv += [
        "--tmpfs",
        "/tmp",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--bind",
        host_dir,
        workdir,
        "--chdir",
        workdir,
        "--clearenv",
        "--setenv",
        "PATH",
        path,
        "--",
    ]
    return argv
