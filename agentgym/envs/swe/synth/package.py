"""A validated bug as an SWE-v0 task: a one-commit repository bundle holding the buggy tree, the
gold patch back to the clean code, and the SWE-bench-style record; the train/test split.

The bundle is made from a NEW repository that only ever held the buggy tree (one commit, fixed
author and date, no tag, no remote, no reflog), so nothing in it leads back to the clean code.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from agentgym.core.errors import SandboxError
from agentgym.envs.swe.synth.mutate import Mutation, apply_edits

__all__ = ["BRANCH", "build_task_repo", "export_tree", "split_by_file"]

BRANCH = "main"
_ENV = {
    "GIT_AUTHOR_NAME": "agentgym synth",
    "GIT_AUTHOR_EMAIL": "synth@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "agentgym synth",
    "GIT_COMMITTER_EMAIL": "synth@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}
_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "diff.noprefix=false",
    "-c",
    "init.defaultBranch=main",
)


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *_CONFIG, *args],
        cwd=cwd,
        env={**os.environ, **_ENV},
        input=stdin,
        capture_output=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()[-500:]
        raise SandboxError(f"git {' '.join(args[:3])} failed in {cwd}: {message}")
    return done.stdout.decode(errors="replace")


def export_tree(repo: Path, commit: str, dest: Path) -> Path:
    """The tracked files of ``commit`` of ``repo`` (no ``.git``) at ``dest`` (absent)."""
    git(repo.parent, "clone", "-q", "--no-checkout", "--no-hardlinks", str(repo), str(dest))
    git(dest, "-c", "advice.detachedHead=false", "checkout", "-q", commit)
    shutil.rmtree(dest / ".git")
    return dest


def build_task_repo(
    clean: Path, edits: Sequence[Mutation], bundle: Path, message: str
) -> tuple[str, str]:
    """Write ``bundle``: one commit of the tree ``clean`` with ``edits`` applied. Returns the
    commit and the gold patch (the diff from the buggy tree back to ``clean``)."""
    paths = sorted({edit.path for edit in edits})
    with tempfile.TemporaryDirectory(prefix="agentgym-synth-") as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(clean, work, symlinks=True)
        originals = {path: (work / path).read_text(encoding="utf-8") for path in paths}
        for path in paths:
            mine = [edit for edit in edits if edit.path == path]
            (work / path).write_text(apply_edits(originals[path], mine), encoding="utf-8")
        git(work, "init", "-q", "-b", BRANCH)
        git(work, "add", "-A", "-f", "--", ".")
        git(work, "commit", "-q", "--no-verify", "-m", message)
        commit = git(work, "rev-parse", "HEAD").strip()
        for path, text in originals.items():
            (work / path).write_text(text, encoding="utf-8")
        patch = git(work, "diff", "--no-color", "--no-ext-diff", "HEAD", "--", *paths)
        bundle.parent.mkdir(parents=True, exist_ok=True)
        git(work, "bundle", "create", "-q", str(bundle.resolve()), BRANCH)
    return commit, patch


def split_by_file(files: Sequence[str], test_fraction: float, seed: int) -> dict[str, str]:
    """Source file -> ``"train"`` or ``"test"``: every task of one file lands on one side.
    At least one file goes to each side when there are two or more."""
    order = sorted(set(files))
    random.Random(seed).shuffle(order)
    n_test = round(len(order) * test_fraction)
    if len(order) >= 2 and test_fraction > 0:
        n_test = min(max(n_test, 1), len(order) - 1)
    return {path: "test" if i < n_test else "train" for i, path in enumerate(order)}
