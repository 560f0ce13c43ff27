"""Turn a project into a git bundle and one verified SWE-bench-style instance per fix commit."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .gitrepo import Repo
from .spec import Commit, Project
from .verify import VerifyError, is_test_path, verify_task

SEED = 2026
OWNER = "agentgym-tasks"


def commit_times(project: Project) -> list[datetime]:
    """A seeded, plausible cadence: a few hours to a few days between commits."""
    rng = random.Random(f"{SEED}:{project.name}")
    when = project.start
    times = [when]
    for _ in project.commits:
        when += timedelta(minutes=rng.randint(4 * 60, 5 * 24 * 60))
        times.append(when)
    return times


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _record(project: Project, repo: Repo, task_commit: Commit, base: str, fix: str) -> dict:
    assert task_commit.task is not None  # the caller passes fix commits only
    changed = repo.changed_files(base, fix)
    name = project.name
    return {
        "instance_id": f"{name}__{name}-{task_commit.task.number}",
        "repo": f"{OWNER}/{name}",
        "repo_path": f"repos/{name}.bundle",
        "base_commit": base,
        "problem_statement": task_commit.task.problem_statement + "\n",
        "test_patch": repo.diff(base, fix, [p for p in changed if is_test_path(p)]),
        "patch": repo.diff(base, fix, [p for p in changed if not is_test_path(p)]),
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
    }


def build_project(project: Project, work: Path, repos: Path, python: str) -> list[dict[str, Any]]:
    """Commit the project's history under ``work``, bundle it into ``repos`` and return its
    verified task records (one per fix commit), in history order."""
    repo = Repo(work / project.name)
    commits = [project.initial, *project.commits]
    maintainer = project.authors[0]
    records: list[dict[str, Any]] = []
    version = project.initial.version or "0.1.0"
    shas: list[str] = []
    for commit, tree, when in zip(commits, project.snapshots(), commit_times(project), strict=True):
        author = project.authors[commit.author]
        sha = repo.commit(tree, commit.message, author, maintainer, when)
        if commit.task is not None:
            record = _record(project, repo, commit, shas[-1], sha)
            record |= {
                "version": version,
                "created_at": _stamp(when),
                "environment_setup_commit": shas[-1],
                "image": None,
                "setup": [],
                "difficulty": commit.task.difficulty,
                "hints_text": "",
            }
            repo.tag(record["instance_id"], shas[-1])
            records.append(record)
        version = commit.version or version
        shas.append(sha)
    numbers = [r["instance_id"] for r in records]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"{project.name}: two tasks share a number: {numbers}")
    bundle = repos / f"{project.name}.bundle"
    repo.bundle(bundle)
    for record in records:
        try:
            verdict = verify_task(
                bundle, record["base_commit"], record["test_patch"], record["patch"], python
            )
        except VerifyError as e:
            raise VerifyError(f"{record['instance_id']}: {e}") from None
        record["FAIL_TO_PASS"] = list(verdict.fail_to_pass)
        record["PASS_TO_PASS"] = list(verdict.pass_to_pass)
    return records
