"""A repository's test suite run in a sandbox: collect its tests, run them, read each outcome.

The outcomes come from the graded test run's own runner (``agentgym.envs.swe.runner``): the
same process layout, the same per-test records and the same reading of them
(``grader.outcomes_of``) as grading a task, so a test synthesis calls failing is one the grader
calls failing. Collection goes through ``pytest --collect-only --verbosity=-1`` (unittest
suites included: pytest runs ``TestCase`` classes).
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import dataclass, field

from agentgym.envs.swe.backends.base import REPO_DIR
from agentgym.envs.swe.grader import GRADER_DIR, VERDICT_BYTES, outcomes_of
from agentgym.envs.swe.runner import (
    RUNNER_FILES,
    canary_problems,
    make_canary,
    read_verdict,
    request,
)
from agentgym.sandbox import Limits, Sandbox

__all__ = ["SuiteRun", "collect", "failure_messages", "install_runner", "reset_repo", "run_suite"]

RUNNER_GRACE = 30.0
# COLUMNS: pytest cuts the short summary's reasons at the terminal width.
_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "COLUMNS": "500"}
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - (.*))?$", re.MULTILINE)


@dataclass
class SuiteRun:
    """One run of the suite: each test's outcome, the files that failed to collect."""

    outcomes: dict[str, str] = field(default_factory=dict)
    """Test id -> ``passed``, ``failed``, ``error``, ``skipped``, ``xfail`` or ``xpass``; a
    test that never ran is absent."""
    collect_errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """What the runner, or the canary's outcome, judged tampering (the grader scores such a
    run 0)."""
    timed_out: bool = False
    output: str = ""
    error: str | None = None

    def passed(self, test: str) -> bool:
        return self.outcomes.get(test) == "passed"


def pytest_args(test_cmd: str | None) -> list[str]:
    """The pytest arguments of ``--test-cmd`` (``pytest ARGS`` or ``python -m pytest ARGS``)."""
    if not test_cmd:
        return []
    words = shlex.split(test_cmd)
    for prefix in (["pytest"], ["python", "-m", "pytest"], ["python3", "-m", "pytest"]):
        if words[: len(prefix)] == prefix:
            return words[len(prefix) :]
    raise ValueError(test_cmd)


async def install_runner(sandbox: Sandbox) -> None:
    for name, source in RUNNER_FILES.items():
        await sandbox.write_file(f"{GRADER_DIR}/{name}", source)


async def collect(sandbox: Sandbox, args: list[str], timeout: float) -> tuple[list[str], str]:
    """The test ids pytest collects with ``args`` (files that fail to import are left out), and
    pytest's output."""
    argv = [
        "python3",
        "-m",
        "pytest",
        "--collect-only",
        # Not -q: a suite whose addopts hold -v (tabulate's) would cancel it and print a tree
        # of <Function ...> lines instead of node ids; --verbosity sets the level outright.
        "--verbosity=-1",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        ".",
        "--continue-on-collection-errors",
        *args,
    ]
    run = await sandbox.run(argv, timeout=timeout, cwd=REPO_DIR, env=_ENV)
    ids = [
        line.strip()
        for line in run.stdout.splitlines()
        if "::" in line and not line.startswith((" ", "ERROR", "FAILED")) and ".py::" in line
    ]
    return list(dict.fromkeys(ids)), (run.stdout + run.stderr)[-4000:]


async def run_suite(
    sandbox: Sandbox,
    tests: list[str],
    timeout: float,
    changed: list[str] = (),  # type: ignore[assignment]
    lines: dict[str, list[int]] | None = None,
) -> SuiteRun:
    """Run ``tests`` (node ids; their files are run whole) with the graded test runner;
    ``changed`` and ``lines`` as the grader passes them for a diff (files, lines it writes)."""
    files = list(dict.fromkeys(test.split("::", 1)[0] for test in tests))
    nonce = secrets.token_hex(16)
    canary = make_canary(tuple(files))
    body = request(nonce, files, [*tests, *files], canary, list(changed), timeout, lines=lines)
    run = await sandbox.run(
        ["python3", "-I", f"{sandbox.workdir}/{GRADER_DIR}/runner.py"],
        stdin=body,
        timeout=timeout + RUNNER_GRACE,
        limits=Limits(output=VERDICT_BYTES),
        cwd=REPO_DIR,
        env=_ENV,
    )
    verdict = read_verdict(run.stdout, nonce) or {}
    output = run.stderr.replace(nonce, "<nonce>")
    if not verdict or verdict.get("error"):
        why = verdict.get("error") or f"the test runner gave no verdict: {output[-1500:]}"
        return SuiteRun(timed_out=run.timed_out, output=output, error=str(why))
    outcomes = outcomes_of(verdict.get("records", []))
    # As the grader judges the canary: a run that stops before reporting it (a test that kills
    # the interpreter or exhausts its memory) scores a gold patch 0 there, so it is flagged.
    passed = all(outcomes.get(t) == "passed" for t in tests)
    return SuiteRun(
        outcomes={t: outcomes[t] for t in tests if t in outcomes},
        collect_errors=[f for f in files if outcomes.get(f) == "error"],
        problems=[
            *(str(p) for p in verdict.get("problems", [])),
            *canary_problems(canary, outcomes, passed),
        ],
        timed_out=bool(run.timed_out or verdict.get("timed_out")),
        output=output,
    )


async def reset_repo(sandbox: Sandbox) -> None:
    """Put the sandbox's repository back at its commit (files written by a run removed)."""
    script = "git checkout -q -- . && git clean -fdq"
    run = await sandbox.run(["bash", "-c", script], timeout=120, cwd=REPO_DIR)
    if not run.ok:
        raise RuntimeError(f"could not reset the sandbox's repository: {run.stderr[-500:]}")


def failure_messages(output: str) -> dict[str, str]:
    """Test id -> the one-line reason of pytest's short summary (``-rfE``) in ``output``."""
    return {m.group(1): (m.group(2) or "").strip() for m in _SUMMARY.finditer(output)}
