"""The SWE grader: which paths are protected, how outcomes are read, and grading on ``calc``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym.core import run_sync as arun
from agentgym.envs.swe import LocalSWEBackend, SWEInstance, read_instances
from agentgym.envs.swe.grader import (
    GradeResult,
    agent_diff,
    config_reason,
    grade,
    outcomes_of,
    patch_paths,
    protected_reason,
)

TEST_PATCH_PATHS = {"pkg/touched.py"}


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("pkg/mod.py", None),
        ("pkg/testing.py", None),
        ("pkg/contest.py", None),
        ("setup.py", None),
        ("pkg/touched.py", "touched by test_patch"),
        ("tests/helpers.py", "in a test directory"),
        ("src/pkg/test/data.json", "in a test directory"),
        ("tests", "in a test directory"),
        ("pkg/test_mod.py", "a test module"),
        ("pkg/mod_test.py", "a test module"),
        ("conftest.py", "a pytest conftest.py"),
        ("pkg/conftest.py", "a pytest conftest.py"),
        ("pytest.ini", "pytest configuration"),
        ("sub/.pytest.ini", "pytest configuration"),
        ("x.dist-info/entry_points.txt", "package metadata (it can register pytest plugins)"),
        ("src/x.egg-info/entry_points.txt", "package metadata (it can register pytest plugins)"),
    ],
)
def test_protected_paths(path: str, reason: str | None) -> None:
    assert protected_reason(path, TEST_PATCH_PATHS) == reason


@pytest.mark.parametrize(
    ("old", "new", "protected"),
    [
        ("[metadata]\nname = x\n", "[metadata]\nname = y\n", False),
        ("[tool:pytest]\naddopts = -q\n", "", True),
        ("", "[pytest]\naddopts = -p x\n", True),
        ("[project]\n", '[project]\n[tool.pytest.ini_options]\naddopts = "-p x"\n', True),
        ("[tool.black]\n", "[tool.black]\nline-length = 100\n", False),
    ],
)
def test_config_files_are_protected_when_they_hold_pytest_settings(
    old: str, new: str, protected: bool
) -> None:
    assert (config_reason(old, new) is not None) == protected


def test_patch_paths_reads_old_and_new_names() -> None:
    patch = (
        "diff --git a/a.py b/b.py\n--- a/a.py\n+++ b/b.py\n@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/new.py b/new.py\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+z\n"
    )
    assert patch_paths(patch) == {"a.py", "b.py", "new.py"}


def test_outcomes_of_setup_call_and_teardown_reports() -> None:
    records = [
        ["t::ok", "setup", "passed", False],
        ["t::ok", "call", "passed", False],
        ["t::ok", "teardown", "passed", False],
        ["t::bad", "call", "failed", False],
        ["t::teardown", "call", "passed", False],
        ["t::teardown", "teardown", "failed", False],
        ["t::skip", "setup", "skipped", False],
        ["t::xfail", "call", "skipped", True],
        ["t::xpass", "call", "passed", True],
        ["t::setup", "setup", "failed", False],
        "garbage",
        [1, 2, 3, 4],
    ]
    assert outcomes_of(records) == {
        "t::ok": "passed",
        "t::bad": "failed",
        "t::teardown": "error",
        "t::skip": "skipped",
        "t::xfail": "xfail",
        "t::xpass": "xpass",
        "t::setup": "error",
    }
    assert outcomes_of({"not": "a list"}) == {}


@pytest.fixture(scope="module")
def calc(calc_jsonl: Path) -> SWEInstance:
    return read_instances(calc_jsonl)[0]


@pytest.fixture
def backend(local_only: None) -> Iterator[LocalSWEBackend]:
    made = LocalSWEBackend()
    yield made
    arun(made.aclose())


def graded(backend: LocalSWEBackend, instance: SWEInstance, diff: str | bytes) -> GradeResult:
    data = diff.encode() if isinstance(diff, str) else diff
    return arun(grade(backend, instance, data, test_timeout=60, max_bytes=1 << 20))


def test_the_gold_patch_scores_1_and_no_change_scores_0(
    backend: LocalSWEBackend, calc: SWEInstance
) -> None:
    assert calc.patch is not None
    gold = graded(backend, calc, calc.patch)
    assert (gold.reward, gold.reason, gold.dropped) == (1.0, "resolved", {})
    assert set(gold.pass_to_pass.values()) == {"passed"}
    nothing = graded(backend, calc, b"")
    assert (nothing.reward, nothing.reason) == (0.0, "tests_failed")
    assert nothing.fail_to_pass == {"tests/test_ops.py::test_mean_float": "failed"}
    assert "3 failed, 2 passed" in nothing.test_output  # the grader's two canaries fail too
    assert (gold.tampering, nothing.tampering) == ([], [])


def test_a_listed_test_that_does_not_exist_counts_as_failed(
    backend: LocalSWEBackend, calc: SWEInstance
) -> None:
    ghost = dataclasses.replace(calc, pass_to_pass=(*calc.pass_to_pass, "tests/test_ops.py::nope"))
    assert ghost.patch is not None
    result = graded(backend, ghost, ghost.patch)
    assert result.reward == 0.0
    assert result.pass_to_pass["tests/test_ops.py::nope"] == "missing"


def test_a_diff_that_does_not_apply_and_a_broken_test_patch(
    backend: LocalSWEBackend, calc: SWEInstance
) -> None:
    bad = "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
    bad += "@@ -1,1 +1,1 @@\n-nothing like this\n+x\n"
    result = graded(backend, calc, bad)
    assert (result.reward, result.reason, result.infra_error) == (0.0, "patch_failed", None)
    broken = dataclasses.replace(calc, test_patch=bad)
    assert broken.patch is not None
    result = graded(backend, broken, broken.patch)
    assert result.reason == "infra_error"
    assert "test_patch does not apply" in str(result.infra_error)


def test_agent_diff_holds_new_files_and_commits_but_not_ignored_caches(
    backend: LocalSWEBackend, calc: SWEInstance
) -> None:
    async def diff() -> bytes | None:
        sb = await backend.acquire(calc)
        try:
            script = (
                "echo new > calc/new.py && echo b >> calc/ops.py && git commit -qam wip && "
                "echo c >> calc/__init__.py && mkdir -p calc/__pycache__ && "
                "echo x > calc/__pycache__/ops.cpython-311.pyc && python3 -m pytest -q"
            )
            await sb.run(["bash", "-c", script], timeout=60, cwd="repo")
            data, _ = await agent_diff(sb, calc, max_bytes=1 << 20)
            return data
        finally:
            await backend.release(sb)

    text = (arun(diff()) or b"").decode()
    assert "b/calc/new.py" in text
    assert "b/calc/ops.py" in text
    assert "b/calc/__init__.py" in text
    assert "pycache" not in text
    assert ".pytest_cache" not in text


MANY = 1000
MANY_TESTS = (
    "diff --git a/tests/test_many.py b/tests/test_many.py\nnew file mode 100644\n"
    "--- /dev/null\n+++ b/tests/test_many.py\n@@ -0,0 +1,6 @@\n+import pytest\n+\n+\n"
    "+@pytest.mark.parametrize('case', "
    f"[f'case-{{i:05d}}-{{\"x\" * 30}}' for i in range({MANY})])\n"
    "+def test_many(case):\n+    assert case.startswith('case-')\n"
)


def test_a_task_listing_a_thousand_tests_is_graded_whole(
    backend: LocalSWEBackend, calc: SWEInstance
) -> None:
    """SWE-bench tasks list hundreds of PASS_TO_PASS tests: the runner's verdict of them all
    must reach the grader whole (a verdict cut at the sandbox's default output limit scored
    every such task 0, gold included)."""
    assert calc.test_patch is not None
    ids = [f"tests/test_many.py::test_many[case-{i:05d}-{'x' * 30}]" for i in range(MANY)]
    many = dataclasses.replace(
        calc, test_patch=calc.test_patch + MANY_TESTS, pass_to_pass=(*calc.pass_to_pass, *ids)
    )
    assert many.patch is not None
    gold = graded(backend, many, many.patch)
    assert (gold.reward, gold.reason) == (1.0, "resolved"), gold.test_output[-1500:]
    assert len(gold.pass_to_pass) == len(calc.pass_to_pass) + MANY
    assert set(gold.pass_to_pass.values()) == {"passed"}
