"""Run a task's tests before and after its gold patch and sort them into FAIL_TO_PASS/PASS_TO_PASS.

Tests run the way the SWE-v0 grader runs them: ``python3 -m pytest`` in the repository root. The
run disables plugin autoloading and the cache so a developer's pytest plugins cannot change the
outcome, and parses the ``-rA`` summary, whose ``PASSED <node id>`` lines pytest 7.2 and later print
alike.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .gitrepo import apply_patch, clone_at

_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (\S+)")
TEST_TIMEOUT_S = 120


class VerifyError(Exception):
    """A task whose tests do not behave as a bug-fix task must; the message says how."""


@dataclass(frozen=True)
class Verdict:
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]


def is_test_path(path: str) -> bool:
    """Test files: anything under a tests/ folder, test_*.py, *_test.py and conftest.py."""
    parts = path.split("/")
    name = parts[-1]
    in_tests = any(part in ("tests", "test") for part in parts[:-1])
    return (
        in_tests or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
    )


def run_pytest(repo: Path, python: str, node_ids: tuple[str, ...] = ()) -> dict[str, bool]:
    """Run the suite (or ``node_ids``) in ``repo``; map each node id to whether it passed."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env |= {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    command = [python, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "--tb=short", *node_ids]
    done = subprocess.run(
        command,
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT_S,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise VerifyError(f"pytest exited {done.returncode} in {repo}:\n{done.stdout[-3000:]}")
    results: dict[str, bool] = {}
    for line in done.stdout.splitlines():
        match = _SUMMARY.match(line)
        if match:
            results[match.group(2)] = match.group(1) == "PASSED"
    if not results:
        raise VerifyError(f"no test results in {repo}:\n{done.stdout[-3000:]}")
    return results


def check_patches(test_patch: str, patch: str) -> None:
    """The test patch touches only test files and the gold patch none."""
    for line in test_patch.splitlines():
        if line.startswith("diff --git ") and not is_test_path(line.split(" b/")[-1]):
            raise VerifyError(f"test_patch touches a non-test file: {line}")
    for line in patch.splitlines():
        if line.startswith("diff --git ") and is_test_path(line.split(" b/")[-1]):
            raise VerifyError(f"patch touches a test file: {line}")
    if not patch or not test_patch:
        raise VerifyError("a task needs both a gold patch and a test patch")


def classify(before: dict[str, bool], after: dict[str, bool]) -> Verdict:
    """Sort test outcomes; every test must pass after the fix and none may break."""
    if set(before) != set(after):
        raise VerifyError(f"the fix changes which tests exist: {sorted(set(before) ^ set(after))}")
    failing_after = sorted(test for test, ok in after.items() if not ok)
    if failing_after:
        raise VerifyError(f"tests still fail with the gold patch: {failing_after}")
    fail_to_pass = tuple(sorted(test for test, ok in before.items() if not ok))
    if not fail_to_pass:
        raise VerifyError("no test fails before the gold patch")
    pass_to_pass = tuple(sorted(test for test, ok in before.items() if ok))
    return Verdict(fail_to_pass, pass_to_pass)


def verify_task(bundle: Path, base: str, test_patch: str, patch: str, python: str) -> Verdict:
    """Check out ``base`` from ``bundle``, apply the test patch, run the suite, apply the fix and
    run every test again by node id, as the grader addresses them."""
    check_patches(test_patch, patch)
    with tempfile.TemporaryDirectory(prefix="swe-verify-") as scratch:
        repo = Path(scratch) / "repo"
        clone_at(bundle, base, repo)
        apply_patch(repo, test_patch)
        before = run_pytest(repo, python)
        apply_patch(repo, patch)
        after = run_pytest(repo, python, tuple(sorted(before)))
    return classify(before, after)
