"""Git plumbing with every input fixed, so the same snapshots always give the same SHAs.

The user's and the system's git configuration are ignored (a global ``diff.noprefix`` or
``commit.gpgsign`` would change the output), names, e-mails and dates come from the caller and
packing uses one thread, which makes the bundle's bytes repeatable for a given git version.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from .spec import Author, Tree

_BASE_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    "TZ": "UTC",
}
_CONFIG = ("-c", "core.autocrlf=false", "-c", "pack.threads=1", "-c", "init.defaultBranch=main")


class GitError(Exception):
    """A git command failed; the message holds the command and its stderr."""


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    return {**env, **_BASE_ENV, **(extra or {})}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    """Run ``git args`` in ``cwd`` and return its stdout; raise GitError when it fails."""
    done = subprocess.run(
        ["git", *_CONFIG, *args],
        cwd=cwd,
        env=git_env(env),
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise GitError(f"git {' '.join(args)} (in {cwd}) failed:\n{done.stderr.strip()}")
    return done.stdout


class Repo:
    """A work tree at ``path`` whose commits are made from whole file snapshots."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        git(path, "init", "-q")

    def write_tree(self, tree: Tree) -> None:
        for child in self.path.iterdir():
            if child.name != ".git":
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        for name, text in tree.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="\n")
            target.chmod(0o644)

    def commit(
        self, tree: Tree, message: str, author: Author, committer: Author, when: datetime
    ) -> str:
        """Commit ``tree`` as the whole work tree; return the new commit's SHA."""
        self.write_tree(tree)
        git(self.path, "add", "-A")
        stamp = when.isoformat()
        env = {
            "GIT_AUTHOR_NAME": author.name,
            "GIT_AUTHOR_EMAIL": author.email,
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_NAME": committer.name,
            "GIT_COMMITTER_EMAIL": committer.email,
            "GIT_COMMITTER_DATE": stamp,
        }
        git(self.path, "commit", "-q", "--no-verify", "--allow-empty", "-m", message, env=env)
        return git(self.path, "rev-parse", "HEAD").strip()

    def tag(self, name: str, commit: str) -> None:
        git(self.path, "tag", name, commit)

    def diff(self, old: str, new: str, paths: list[str]) -> str:
        """The unified diff from ``old`` to ``new`` limited to ``paths`` ('' when none)."""
        if not paths:
            return ""
        return git(
            self.path, "diff", "--no-color", "--no-ext-diff", "--no-renames", old, new, "--", *paths
        )

    def changed_files(self, old: str, new: str) -> list[str]:
        out = git(self.path, "diff", "--name-only", "--no-renames", old, new)
        return sorted(out.splitlines())

    def bundle(self, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        git(self.path, "bundle", "create", "-q", str(dest.resolve()), "--all")


def clone_at(bundle: Path, commit: str, dest: Path) -> None:
    """Clone ``bundle`` into ``dest`` and check out ``commit`` (detached)."""
    git(bundle.parent, "clone", "-q", "--no-checkout", str(bundle.resolve()), str(dest))
    git(dest, "-c", "advice.detachedHead=false", "checkout", "-q", commit)


def apply_patch(repo: Path, patch: str) -> None:
    if patch:
        git(repo, "apply", "--whitespace=nowarn", "-", stdin=patch)


def bundle_content(bundle: Path, scratch: Path) -> tuple[str, str]:
    """(its refs, every object id reachable from them): equal for equal histories."""
    heads = git(bundle.parent, "bundle", "list-heads", str(bundle.resolve()))
    clone = scratch / bundle.stem
    git(scratch, "clone", "-q", "--bare", str(bundle.resolve()), str(clone))
    objects = git(clone, "rev-list", "--objects", "--all")
    return heads, "\n".join(sorted(objects.splitlines()))
