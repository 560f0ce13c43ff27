"""A tiny SWE instance built from a temp git repository, and helpers for the SWE tests.

The project ``calc`` has a bug (``mean`` uses floor division); the fix commit, on a branch of
its own, adds a failing test and the one-character fix. ``test_patch`` and ``patch`` are the
diffs of that commit; the repository ships as a git bundle holding every branch.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentgym.sandbox import bwrap_usable

OPS = """def add(a, b):
    return a + b


def mean(values):
    if not values:
        raise ValueError("mean of nothing")
    return sum(values) // len(values)
"""
TESTS = """from calc.ops import add, mean


def test_add():
    assert add(2, 3) == 5


def test_mean_int():
    assert mean([2, 4]) == 3
"""
NEW_TEST = """

def test_mean_float():
    assert mean([1, 2]) == 1.5
"""
PROBLEM = "calc.ops.mean([1, 2]) returns 1, but the mean of 1 and 2 is 1.5."


# Fixed identities and dates make the commits, hence ``base_commit`` and the docker image tag
# that hashes it, the same in every test session: the image is built once, not once a session.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "calc",
    "GIT_AUTHOR_EMAIL": "calc@example.com",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "calc",
    "GIT_COMMITTER_EMAIL": "calc@example.com",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
}
# Settings a user's global git config could change the commits (or the diffs) with.
_GIT_CONFIG = ("commit.gpgsign=false", "core.autocrlf=false", "diff.noprefix=false")


def git(repo: Path, *args: str) -> str:
    config = [arg for setting in _GIT_CONFIG for arg in ("-c", setting)]
    done = subprocess.run(
        ["git", *config, *args],
        cwd=repo,
        env={**os.environ, **_GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def build_calc(root: Path) -> dict[str, Any]:
    """Make the ``calc`` repository under ``root``; return its instance (repo_path: the bundle)."""
    repo = root / "calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(OPS)
    (repo / "tests" / "test_ops.py").write_text(TESTS)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc with add and mean")
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "fix")
    (repo / "calc" / "ops.py").write_text(OPS.replace("//", "/"))
    (repo / "tests" / "test_ops.py").write_text(TESTS + NEW_TEST)
    git(repo, "commit", "-q", "-am", "mean: true division")
    fix = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    git(repo, "bundle", "create", str(root / "calc.bundle"), "--all")
    return {
        "instance_id": "calc__calc-1",
        "repo": "tests/calc",
        "repo_path": "calc.bundle",
        "base_commit": base,
        "problem_statement": PROBLEM,
        "test_patch": git(repo, "diff", base, fix, "--", "tests"),
        "patch": git(repo, "diff", base, fix, "--", "calc"),
        "FAIL_TO_PASS": ["tests/test_ops.py::test_mean_float"],
        "PASS_TO_PASS": ["tests/test_ops.py::test_add", "tests/test_ops.py::test_mean_int"],
        "version": "1.0",
        "difficulty": "easy",
        "fix_commit": fix,
    }


@pytest.fixture(scope="session")
def calc_jsonl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A JSONL file holding the ``calc`` instance (its bundle next to it)."""
    root = tmp_path_factory.mktemp("swe-calc")
    record = build_calc(root)
    path = root / "instances.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return path


@pytest.fixture(scope="session")
def calc_record(calc_jsonl: Path) -> dict[str, Any]:
    return json.loads(calc_jsonl.read_text())


@pytest.fixture(scope="session")
def local_only() -> None:
    """Skip where bubblewrap cannot run (the local backend refuses to start), or fail when
    ``AGENTGYM_REQUIRE_DOCKER=1`` (CI installs everything, see tests/envs/conftest.py)."""
    if not bwrap_usable():
        reason = "bubblewrap (bwrap) cannot create sandboxes here"
        if os.environ.get("AGENTGYM_REQUIRE_DOCKER") == "1":
            pytest.fail(f"{reason} (AGENTGYM_REQUIRE_DOCKER=1 requires it)")
        pytest.skip(reason)
