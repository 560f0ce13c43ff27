"""Check an instance's repository out at its base commit, on the host, with no future history.

``materialize(instance, dest)`` makes ``dest`` a git work tree at ``base_commit`` on a branch
``agentgym``: clean status, a local ``user.name`` / ``user.email``, no remote, no other branch
or tag, and only the objects reachable from ``base_commit`` (so ``git log --all`` cannot show
the agent the commit that fixed the bug). ``.git/info/exclude`` ignores ``__pycache__/``,
``*.pyc`` and ``.pytest_cache/`` so running the tests leaves the status clean. Setup commands
are not run here (the backend runs them in the sandbox).

``CheckoutCache`` keeps one checkout per instance on the host for backends that copy it into
each sandbox; ``CheckoutCache.shared()`` is one for the whole process.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import zipfile
from pathlib import Path

from agentgym.core.errors import ConfigError, SandboxError
from agentgym.envs.swe.instances import SWEInstance

__all__ = ["BRANCH", "CheckoutCache", "materialize"]

BRANCH = "agentgym"
"""The branch the checkout is on; it points at ``base_commit``."""
GIT_TIMEOUT = 300.0
EXCLUDES = "__pycache__/\n*.py[cod]\n.pytest_cache/\n"
# Deterministic, hook-free, pager-free git whatever the host's global config says.
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "LC_ALL": "C",
}
_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git on the host; a failure raises ``SandboxError`` with git's message."""
    env = {**os.environ, **_GIT_ENV}
    try:
        done = subprocess.run(
            ["git", "-c", "core.hooksPath=/dev/null", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        raise SandboxError("git is not installed here. Fix: apt-get install git") from None
    except subprocess.TimeoutExpired:
        raise SandboxError(f"git {' '.join(args[:2])} ran past {GIT_TIMEOUT:g} s") from None
    if done.returncode != 0:
        raise SandboxError(f"git {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def materialize(instance: SWEInstance, dest: Path) -> Path:
    """Make ``dest`` (absent or empty) a clean work tree of ``instance`` at ``base_commit``.

    Raises ``ConfigError`` when the instance has no local repository or its ``base_commit`` is
    not in it, ``SandboxError`` when git fails.
    """
    if instance.repo_path is None:
        raise ConfigError(
            f"instance {instance.instance_id!r}: repo_path",
            None,
            "is needed to check the repository out on this machine",
            "add repo_path (a git dir, .bundle or archive) to the instance",
        )
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise ConfigError("dest", str(dest), "is not empty", "pass a new or empty folder")
    with tempfile.TemporaryDirectory(prefix="agentgym-swe-") as tmp:
        mirror = Path(tmp) / "mirror.git"
        source = _git_source(instance.repo_path, Path(tmp))
        git("clone", "--quiet", "--bare", str(source), str(mirror))
        try:
            wanted = f"{instance.base_commit}^{{commit}}"
            commit = git("rev-parse", "--verify", "--quiet", wanted, cwd=mirror)
        except SandboxError:
            raise ConfigError(
                f"instance {instance.instance_id!r}: base_commit",
                instance.base_commit,
                f"is not a commit of {instance.repo_path}",
                "use a commit reachable from a branch or tag of the repository",
            ) from None
        git("update-ref", f"refs/heads/{BRANCH}", commit.strip(), cwd=mirror)
        # --no-local packs only what the branch reaches: no later commit comes along.
        git(
            "clone", "--quiet", "--no-local", "--single-branch", "--no-tags",
            "--branch", BRANCH, str(mirror), str(dest),
        )  # fmt: skip
    git("remote", "remove", "origin", cwd=dest)
    git("config", "user.name", "agentgym", cwd=dest)
    git("config", "user.email", "agentgym@localhost", cwd=dest)
    git("reflog", "expire", "--expire=now", "--all", cwd=dest)
    exclude = dest / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with exclude.open("a", encoding="utf-8") as f:
        f.write(EXCLUDES)
    return dest


def _git_source(path: Path, tmp: Path) -> Path:
    """Something ``git clone`` reads: the git dir or bundle itself, or an unpacked archive."""
    name = path.name.lower()
    if path.is_dir() or name.endswith(".bundle"):
        return path
    if not name.endswith(_ARCHIVES):
        raise ConfigError(
            "repo_path",
            str(path),
            "is neither a folder, a .bundle nor a .tar/.tar.gz/.tgz/.zip archive",
            "point repo_path at one of those",
        )
    unpacked = tmp / "unpacked"
    unpacked.mkdir()
    if name.endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            archive.extractall(unpacked)
    else:
        with tarfile.open(path) as archive:
            _extract_tar(archive, unpacked)
    entries = [e for e in unpacked.iterdir() if e.name != "__MACOSX"]
    # An archive of the repository folder itself, or of its contents.
    root = entries[0] if len(entries) == 1 and entries[0].is_dir() else unpacked
    if len(entries) == 1 and entries[0].name.endswith(".bundle"):
        return entries[0]
    if not ((root / ".git").exists() or (root / "HEAD").is_file()):
        raise ConfigError(
            "repo_path",
            str(path),
            "holds no git repository (no .git folder at its top or in its single folder)",
            "archive the repository with its .git folder",
        )
    return root


def _extract_tar(archive: tarfile.TarFile, dest: Path) -> None:
    if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuses links and paths out of dest
        archive.extractall(dest, filter="data")
        return
    for member in archive.getmembers():
        target = (dest / member.name).resolve()
        if not target.is_relative_to(dest.resolve()) or member.islnk() or member.isdev():
            raise ConfigError("repo_path", member.name, "escapes the archive", "re-create it")
    archive.extractall(dest)


class CheckoutCache:
    """One host checkout per instance, made on first use and removed by ``clear()``.

    Keyed by instance id, repository path and base commit, so two task files reusing an id
    never share a checkout. ``shared()`` is the process-wide one (removed at exit).
    """

    _shared: CheckoutCache | None = None

    def __init__(self, root: str | None = None) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="agentgym-swe-checkouts-", dir=root))
        self._paths: dict[tuple[str, str, str], Path] = {}
        self._lock = threading.Lock()

    @classmethod
    def shared(cls) -> CheckoutCache:
        with _SHARED_LOCK:
            if cls._shared is None:
                cls._shared = cls()
                atexit.register(cls._shared.clear)
            return cls._shared

    def get(self, instance: SWEInstance) -> Path:
        """The checkout of ``instance`` (thread-safe; call it in a worker thread)."""
        key = (instance.instance_id, str(instance.repo_path), instance.base_commit)
        with self._lock:
            if key not in self._paths:
                dest = Path(tempfile.mkdtemp(prefix="checkout-", dir=self._root))
                self._paths[key] = materialize(instance, dest)
            return self._paths[key]

    def clear(self) -> None:
        with self._lock:
            self._paths.clear()
            shutil.rmtree(self._root, ignore_errors=True)


_SHARED_LOCK = threading.Lock()
