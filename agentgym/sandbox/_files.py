"""Host-side file access to a sandbox's work dir that sandboxed code cannot redirect.

The work dir is a host folder that untrusted code writes to, so it may hold symlinks to
``/etc/shadow`` or swap a folder for a symlink between two calls. Every path is therefore walked
one component at a time from an open directory fd with ``O_NOFOLLOW``; a symlink is resolved by
hand and only while it stays inside the work dir (the semantics of ``openat2``'s
``RESOLVE_IN_ROOT``, which Python does not expose).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import posixpath
import shutil
import stat
from collections.abc import Iterator

from agentgym.core.errors import SandboxFileError

__all__ = ["HostFileMethods", "WorkdirFiles"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_LINKS = 40


def _error(code: int, path: str, why: str | None = None) -> SandboxFileError:
    return SandboxFileError(code, why or os.strerror(code), path)


class WorkdirFiles:
    """Read, write and copy into the host folder ``root``, seen as ``inner`` inside the sandbox.

    ``owner`` (uid, gid) is given to everything written, so that sandboxed code running as that
    user can change it.
    """

    def __init__(self, root: str, inner: str, owner: tuple[int, int] | None = None) -> None:
        self.root, self.inner, self.owner = root, inner, owner

    # -- path walking ---------------------------------------------------------------------

    def _parts(self, path: str) -> list[str]:
        if not isinstance(path, str) or "\0" in path:
            raise _error(errno.EINVAL, str(path), "path must be a str without NUL bytes")
        if posixpath.isabs(path):
            rel = posixpath.relpath(posixpath.normpath(path), self.inner)
            if rel == ".." or rel.startswith("../"):
                raise _error(errno.EXDEV, path, f"outside the work dir {self.inner}")
            path = rel
        return [p for p in path.split("/") if p not in ("", ".")]

    def _link_parts(self, target: str, path: str) -> tuple[bool, list[str]]:
        """A symlink target as (absolute?, parts relative to where it restarts)."""
        if not posixpath.isabs(target):
            return False, target.split("/")
        rel = posixpath.relpath(posixpath.normpath(target), self.inner)
        if rel == ".." or rel.startswith("../"):
            raise _error(errno.EXDEV, path, f"a symlink leads outside the work dir ({target})")
        return True, rel.split("/")

    @contextlib.contextmanager
    def _walk(self, path: str, *, create_dirs: bool = False) -> Iterator[tuple[int, str]]:
        """Yield (fd of the parent dir, final name) of ``path``, resolved inside the root."""
        todo = list(reversed(self._parts(path)))
        stack = [os.open(self.root, _DIR_FLAGS)]
        try:
            yield self._descend(stack, todo, path, create_dirs)
        finally:
            for fd in stack:
                os.close(fd)

    def _descend(
        self, stack: list[int], todo: list[str], path: str, create_dirs: bool
    ) -> tuple[int, str]:
        links = 0
        while todo:
            name = todo.pop()
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                continue
            target = _readlink(stack[-1], name, path, must_exist=bool(todo) and not create_dirs)
            if target is not None:
                links += 1
                if links > _MAX_LINKS:
                    raise _error(errno.ELOOP, path)
                absolute, parts = self._link_parts(target, path)
                if absolute:
                    while len(stack) > 1:
                        os.close(stack.pop())
                todo.extend(reversed([p for p in parts if p not in ("", ".")]))
            elif not todo:
                return stack[-1], name
            else:
                stack.append(self._open_dir(stack[-1], name, path, create_dirs))
        raise _error(errno.EISDIR, path, "names a folder, not a file")

    def _open_dir(self, dir_fd: int, name: str, path: str, create: bool) -> int:
        if create:
            try:
                os.mkdir(name, 0o755, dir_fd=dir_fd)
                self._chown(dir_fd, name)
            except FileExistsError:
                pass
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as e:
            raise _error(e.errno or errno.EIO, path) from None

    def _chown(self, dir_fd: int, name: str) -> None:
        if self.owner is not None:
            os.chown(name, *self.owner, dir_fd=dir_fd, follow_symlinks=False)

    # -- operations -----------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        with self._walk(path) as (dir_fd, name):
            fd = _open_regular(dir_fd, name, os.O_RDONLY, path)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        with self._walk(path, create_dirs=True) as (dir_fd, name):
            self._write_at(dir_fd, name, data, mode, path)

    def _write_at(self, dir_fd: int, name: str, data: bytes, mode: int, path: str) -> None:
        # Not O_TRUNC: ext4 flushes a file truncated to 0 when it is closed (auto_da_alloc),
        # which made every rewrite of a program cost milliseconds. Overwrite, then cut.
        fd = _open_regular(dir_fd, name, os.O_WRONLY | os.O_CREAT, path, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.truncate()
            os.fchmod(f.fileno(), mode)
            if self.owner is not None:
                os.fchown(f.fileno(), *self.owner)

    def upload(self, local_dir: str, dest: str) -> None:
        """Copy the contents of host folder ``local_dir`` into ``dest`` (created if missing)."""
        if not os.path.isdir(local_dir):
            raise _error(errno.ENOTDIR, local_dir, "upload needs an existing host folder")
        for here, dirs, files in os.walk(local_dir):
            rel = os.path.relpath(here, local_dir)
            base = dest if rel == "." else posixpath.join(dest, rel.replace(os.sep, "/"))
            for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
                self._copy_one(os.path.join(here, name), posixpath.join(base, name))
            if not files and not dirs:
                self.mkdir(base)

    def _copy_one(self, src: str, dest: str) -> None:
        st = os.lstat(src)
        if stat.S_ISLNK(st.st_mode):
            with self._walk(dest, create_dirs=True) as (dir_fd, name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dir_fd)
                os.symlink(os.readlink(src), name, dir_fd=dir_fd)
                self._chown(dir_fd, name)
        elif stat.S_ISREG(st.st_mode):
            with open(src, "rb") as f:
                data = f.read()
            self.write(dest, data, stat.S_IMODE(st.st_mode) | 0o200)

    def mkdir(self, path: str) -> None:
        if not self._parts(path):
            return
        with self._walk(path, create_dirs=True) as (dir_fd, name):
            os.close(self._open_dir(dir_fd, name, path, create=True))

    def clear(self) -> None:
        """Remove everything inside the root (which stays)."""
        with os.scandir(self.root) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    _rmtree(entry.path)
                else:
                    os.unlink(entry.path)

    def remove(self) -> None:
        """Remove the root and everything in it."""
        if os.path.lexists(self.root):
            _rmtree(self.root)


def _open_regular(dir_fd: int, name: str, flags: int, path: str, mode: int = 0o644) -> int:
    """Open a regular file without following a symlink or blocking on a FIFO."""
    flags |= os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as e:
        raise _error(e.errno or errno.EIO, path) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _error(errno.EISDIR, path, "not a regular file")
    os.set_blocking(fd, True)
    return fd


def _readlink(dir_fd: int, name: str, path: str, *, must_exist: bool) -> str | None:
    """The target if ``name`` is a symlink, else None (also when missing and allowed to be)."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        if must_exist:
            raise _error(errno.ENOENT, path) from None
        return None
    except OSError as e:
        if e.errno == errno.EINVAL:  # not a symlink
            return None
        raise _error(e.errno or errno.EIO, path) from None


def _rmtree(path: str) -> None:
    try:
        shutil.rmtree(path)
    except PermissionError:
        # Sandboxed code may chmod its folders to 0; their owner (or root) can undo that.
        for here, dirs, _ in os.walk(path):
            for d in dirs:
                with contextlib.suppress(OSError, NotImplementedError):
                    os.chmod(os.path.join(here, d), 0o700, follow_symlinks=False)
        shutil.rmtree(path)


class HostFileMethods:
    """``Sandbox.read_file`` / ``write_file`` / ``upload`` for backends whose work dir is a host
    folder: both backends keep a ``WorkdirFiles`` as ``_files`` and define ``_check_open``."""

    _files: WorkdirFiles

    def _check_open(self) -> None:
        raise NotImplementedError

    async def read_file(self, path: str) -> bytes:
        self._check_open()
        return await asyncio.to_thread(self._files.read, path)

    async def write_file(self, path: str, data: str | bytes, *, mode: int = 0o644) -> None:
        self._check_open()
        raw = data.encode() if isinstance(data, str) else bytes(data)
        await asyncio.to_thread(self._files.write, path, raw, mode)

    async def upload(self, local_dir: str | os.PathLike[str], dest: str = ".") -> None:
        self._check_open()
        await asyncio.to_thread(self._files.upload, os.fspath(local_dir), dest)
