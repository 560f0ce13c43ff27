"""The shipped SWE-v0 task set: well formed, reproducible, and every task a real bug fix.

The checks here re-run each task with plain git and pytest, independently of the build script
(scripts/build_swe_tasks.py) and of the env, the way the grader judges it: at ``base_commit`` with
the test patch applied every FAIL_TO_PASS test fails and every PASS_TO_PASS test passes; with the
gold patch too, all of them pass.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentgym.envs.swe.instances import DATA_DIR, read_instances

ROOT = Path(__file__).resolve().parents[3]
BUILDER = ROOT / "scripts" / "build_swe_tasks.py"
RECORDS: list[dict[str, Any]] = [
    json.loads(line) for line in (DATA_DIR / "instances.jsonl").read_text("utf-8").splitlines()
]
FIELDS = [
    "instance_id", "repo", "repo_path", "base_commit", "problem_statement", "test_patch",
    "patch", "FAIL_TO_PASS", "PASS_TO_PASS", "version", "created_at",
    "environment_setup_commit", "image", "setup", "difficulty", "hints_text",
]  # fmt: skip
INSTANCE_ID = re.compile(r"(?P<project>[a-z][a-z0-9]*)__(?P=project)-[1-9][0-9]*")
SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR) (\S+)", re.MULTILINE)
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def pytest_outcomes(repo: Path, node_ids: list[str]) -> dict[str, bool]:
    """Run ``python -m pytest`` in ``repo`` (the given tests, or all); node id -> passed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env |= {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *node_ids],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stdout[-2000:]
    return {node: status == "PASSED" for status, node in SUMMARY.findall(done.stdout)}


def changed_files(diff: str) -> list[str]:
    return re.findall(r"^diff --git a/\S+ b/(\S+)$", diff, re.MULTILINE)


def is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or name.startswith("test_") or name == "conftest.py"


@pytest.fixture(scope="module")
def bundle_refs() -> dict[str, dict[str, str]]:
    """For each bundle: its refs (name -> sha)."""
    refs = {}
    for bundle in sorted((DATA_DIR / "repos").glob("*.bundle")):
        heads = git(bundle.parent, "bundle", "list-heads", bundle.name).splitlines()
        refs[bundle.name] = {line.split()[1]: line.split()[0] for line in heads}
    return refs


def test_at_least_twenty_tasks_in_several_projects() -> None:
    projects = Counter(record["repo"] for record in RECORDS)
    assert len(RECORDS) >= 20
    assert len(projects) >= 5
    assert all(count >= 3 for count in projects.values()), projects


def test_ids_are_unique_sorted_and_swe_bench_style() -> None:
    ids = [record["instance_id"] for record in RECORDS]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for record in RECORDS:
        match = INSTANCE_ID.fullmatch(record["instance_id"])
        assert match, record["instance_id"]
        project = match["project"]
        assert record["repo"] == f"agentgym-tasks/{project}"
        assert record["repo_path"] == f"repos/{project}.bundle"


def test_records_follow_the_format() -> None:
    for record in RECORDS:
        assert list(record) == FIELDS
        assert re.fullmatch(r"[0-9a-f]{40}", record["base_commit"])
        assert record["environment_setup_commit"] == record["base_commit"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["created_at"])
        assert record["FAIL_TO_PASS"], record["instance_id"]
        assert record["PASS_TO_PASS"], record["instance_id"]
        assert not set(record["FAIL_TO_PASS"]) & set(record["PASS_TO_PASS"])
        assert record["image"] is None
        assert record["setup"] == []
        assert record["hints_text"] == ""
        assert record["difficulty"] in ("easy", "medium", "hard")


def test_the_env_loader_reads_every_shipped_instance() -> None:
    instances = read_instances()
    assert [i.instance_id for i in instances] == [r["instance_id"] for r in RECORDS]
    assert all(i.repo_path is not None and i.repo_path.is_file() for i in instances)


def test_every_base_commit_is_tagged_in_its_bundle(
    bundle_refs: dict[str, dict[str, str]],
) -> None:
    assert {Path(r["repo_path"]).name for r in RECORDS} == set(bundle_refs)
    for record in RECORDS:
        refs = bundle_refs[Path(record["repo_path"]).name]
        assert refs[f"refs/tags/{record['instance_id']}"] == record["base_commit"]
        assert "refs/heads/main" in refs


def test_shipped_bundles_are_small() -> None:
    sizes = [bundle.stat().st_size for bundle in (DATA_DIR / "repos").glob("*.bundle")]
    assert sum(sizes) < 300_000


def test_test_patch_touches_only_tests_and_the_gold_patch_none() -> None:
    for record in RECORDS:
        tests, code = changed_files(record["test_patch"]), changed_files(record["patch"])
        assert tests, record["instance_id"]
        assert all(is_test_file(path) for path in tests), record["instance_id"]
        assert code, record["instance_id"]
        assert not any(is_test_file(path) for path in code), record["instance_id"]


def test_problem_statements_describe_the_symptom_not_the_fix() -> None:
    for record in RECORDS:
        statement = record["problem_statement"]
        added = [line[1:].strip() for line in record["patch"].splitlines() if line[:1] == "+"]
        leaked = [line for line in added if len(line) >= 10 and line in statement]
        assert leaked == [], record["instance_id"]
        assert not [path for path in changed_files(record["patch"]) if path in statement]
        assert "```" in statement, record["instance_id"]  # a repro snippet
        assert len(statement.splitlines()) >= 8, record["instance_id"]


def test_difficulty_follows_the_size_of_the_fix() -> None:
    counts = Counter(record["difficulty"] for record in RECORDS)
    assert all(counts[level] >= len(RECORDS) // 5 for level in ("easy", "medium", "hard"))
    for record in RECORDS:
        files = changed_files(record["patch"])
        lines = [line for line in record["patch"].splitlines() if line[:1] in "+-"]
        changed = [line for line in lines if not line.startswith(("+++", "---"))]
        expected = {"easy": "one line", "medium": "one file", "hard": "several files"}
        if len(files) >= 2:
            size = "several files"
        else:
            size = "one line" if len(changed) <= 2 else "one file"
        assert size == expected[record["difficulty"]], record["instance_id"]


@pytest.mark.slow
@pytest.mark.parametrize("record", RECORDS, ids=[r["instance_id"] for r in RECORDS])
def test_fail_to_pass_fail_before_the_gold_patch_and_all_pass_after(
    record: dict[str, Any], tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "clone", "-q", "--no-checkout", str(DATA_DIR / record["repo_path"]), str(repo))
    git(repo, "-c", "advice.detachedHead=false", "checkout", "-q", record["base_commit"])
    git(repo, "apply", "-", stdin=record["test_patch"])
    fail_to_pass, pass_to_pass = record["FAIL_TO_PASS"], record["PASS_TO_PASS"]

    before = pytest_outcomes(repo, [])  # the whole suite: the lists must cover all of it
    assert set(before) == {*fail_to_pass, *pass_to_pass}
    assert [test for test in fail_to_pass if before[test]] == []
    assert [test for test in pass_to_pass if not before[test]] == []

    git(repo, "apply", "-", stdin=record["patch"])
    after = pytest_outcomes(repo, [*fail_to_pass, *pass_to_pass])  # by node id, as graded
    assert after == dict.fromkeys([*fail_to_pass, *pass_to_pass], True)


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the build's own deadline is 1,200 s: under CI's load it took 300+
def test_the_build_script_reproduces_the_shipped_files() -> None:
    done = subprocess.run(
        [sys.executable, str(BUILDER), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "up to date" in done.stdout
