"""Forging a pass on agentgym/SWE-v0: every attempt in ``attacks`` scores 0, on both backends.

Each attack is graded as the env grades a submitted diff (``grade``: a fresh sandbox, the diff
applied, protected paths dropped, the scan, the test patch, the runner). Three angles:

- as shipped: each attack scores 0;
- with the diff scan switched off: the runner's own layers still stop each one (``tampering``
  names what they found, or the attack could not change what the tests report);
- attacks written to get past the scan: the scan finds nothing, the runner does.

The real fix scores 1 through the same path, alone and beside harmless code that names what
the scan looks for only in comments.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attacks
import pytest
from conftest import git
from docker_checks import containers, new_label, wait_until

from agentgym.core import run_sync
from agentgym.envs.swe import SWEInstance, read_instances
from agentgym.envs.swe import grader as grader_module
from agentgym.envs.swe.backends import LocalSWEBackend, SWEBackend
from agentgym.envs.swe.grader import GradeResult, grade
from agentgym.envs.swe.tampering import scan_diff
from agentgym.sandbox import bwrap_usable

F2P = "tests/test_ops.py::test_mean_float"
FIX = {"calc/ops.py": None}  # None: the fixed ops.py, see `Repo.diff`
ALL = {**attacks.PLAIN, **attacks.HIDDEN, **attacks.INERT}


class Repo:
    """A clone of ``calc`` at its base commit, to write attacks into and take their diff."""

    def __init__(self, bundle: Path, base: str, folder: Path) -> None:
        self.base, self.path = base, folder
        subprocess.run(["git", "clone", "-q", str(bundle), str(folder)], check=True)
        git(folder, "checkout", "-q", base)

    def diff(self, files: dict[str, str | None]) -> bytes:
        """The ``git diff --binary`` of writing ``files`` (None: ``mean`` fixed) over base."""
        for name, text in files.items():
            path = self.path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if text is None:
                text = (self.path / name).read_text().replace("//", "/")
            path.write_text(text)
        git(self.path, "add", "-A")
        out = subprocess.run(
            ["git", "diff", "--cached", "--binary", "--full-index", self.base],
            cwd=self.path,
            capture_output=True,
            check=True,
        ).stdout
        git(self.path, "reset", "-q", "--hard", self.base)
        git(self.path, "clean", "-qfdx")
        return out


@pytest.fixture(scope="module")
def calc(calc_jsonl: Path) -> SWEInstance:
    return read_instances(calc_jsonl)[0]


@pytest.fixture(scope="module")
def repo(calc_jsonl: Path, calc: SWEInstance, tmp_path_factory: pytest.TempPathFactory) -> Repo:
    folder = tmp_path_factory.mktemp("forging") / "calc"
    return Repo(calc_jsonl.parent / "calc.bundle", calc.base_commit, folder)


def _unavailable(reason: str) -> None:
    if os.environ.get("AGENTGYM_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{reason} (AGENTGYM_REQUIRE_DOCKER=1 requires it)")
    pytest.skip(reason)


@pytest.fixture(scope="module", params=["local", "docker"])
def backend(request: pytest.FixtureRequest) -> Iterator[SWEBackend]:
    """Each backend, skipped (failed under ``AGENTGYM_REQUIRE_DOCKER=1``) where it cannot run."""
    labels: dict[str, str] = {}
    if request.param == "docker":
        request.getfixturevalue("docker_ready")
        from agentgym.envs.swe.backends.docker import DockerSWEBackend

        labels = new_label()
        made: SWEBackend = DockerSWEBackend(pool_size=1, labels=labels)
    else:
        if not bwrap_usable():
            _unavailable("bubblewrap (bwrap) cannot create sandboxes here")
        made = LocalSWEBackend(isolation="bwrap")
    yield made
    run_sync(made.aclose())
    if labels:
        assert wait_until(lambda: not containers(labels), 30), "containers outlived the tests"


def graded(backend: SWEBackend, instance: SWEInstance, diff: bytes) -> GradeResult:
    return run_sync(grade(backend, instance, diff, test_timeout=60, max_bytes=1 << 20))


def why(result: GradeResult) -> Any:
    return (result.reason, result.tampering, result.fail_to_pass, result.test_output[-1500:])


@pytest.mark.parametrize("name", list(ALL))
def test_every_attack_scores_0(
    name: str, backend: SWEBackend, calc: SWEInstance, repo: Repo
) -> None:
    result = graded(backend, calc, repo.diff(ALL[name]))
    assert result.reward == 0.0, why(result)
    assert result.fail_to_pass[F2P] != "passed" or result.tampering, why(result)
    assert result.infra_error is None, why(result)
    if name in attacks.PLAIN:
        assert result.reason == "tampering", why(result)
        assert set(result.fail_to_pass.values()) == {"not_run"}  # found before the tests ran


@pytest.mark.parametrize("name", list(attacks.PLAIN))
def test_without_the_scan_the_runner_stops_each_attack(
    name: str,
    backend: SWEBackend,
    calc: SWEInstance,
    repo: Repo,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(grader_module, "scan_diff", lambda diff: [])
    result = graded(backend, calc, repo.diff(attacks.PLAIN[name]))
    assert result.reward == 0.0, why(result)
    assert result.infra_error is None, why(result)
    caught = result.reason == "tampering" and result.tampering
    assert caught or result.fail_to_pass[F2P] in ("failed", "missing", "error"), why(result)
    if name in RUNTIME_CATCHES:
        assert result.reason == "tampering", why(result)
        assert any(RUNTIME_CATCHES[name] in t for t in result.tampering), why(result)


RUNTIME_CATCHES = {
    "patch-TestReport.from_item_and_call": "TestReport.from_item_and_call was changed",
    "TestReport.outcome-property": "TestReport.outcome was added",
    "patch-CallInfo.from_call": "CallInfo.from_call was changed",
    "swap-call_and_report-code": "call_and_report was changed during the tests: it had its code",
    "register-makereport-hook": "pytest_runtest_makereport hook implementation",
    "replace-sys.modules-entry": "sys.modules['_pytest.outcomes'] was replaced",
    "settrace-left-set": "a trace or profile function",
    "import-hook-rewrites-tests": "an import hook was added to sys.meta_path",
    "unittest-assertions-off": "TestCase.assertEqual was changed",
    "os._exit-at-import": "exited before the runner reported",
    "conftest-planted-at-run-time": "created tests/conftest.py",
    "plant-bytecode": "created calc/__pycache__/evil.cpython-311.pyc",
}
"""What the runner reports for the attacks it must name (the rest cannot forge a pass)."""

HIDDEN_CATCHES = {
    "hidden-TestReport-patch": "TestReport.from_item_and_call was changed",
    "hidden-makereport-hook": "pytest_runtest_makereport hook implementation",
    "hidden-wrap-the-recorder": "always-failing test",  # the canary alone sees this one
    "hidden-os._exit": "exited before the runner reported",
    "hidden-unittest-patch": "TestCase.assertEqual was changed",
    "hidden-test-rewrite": "changed tests/test_ops.py",
    "hidden-settrace": "a trace or profile function",
    "hidden-blank-the-tests": "the test function of tests/test_ops.py::test_mean_float was",
}


@pytest.mark.parametrize("name", list(attacks.HIDDEN))
def test_attacks_hidden_from_the_scan_are_caught_by_the_runner(
    name: str, backend: SWEBackend, calc: SWEInstance, repo: Repo
) -> None:
    diff = repo.diff(attacks.HIDDEN[name])
    assert scan_diff(diff.decode()) == []  # the point of these attacks
    result = graded(backend, calc, diff)
    assert result.reward == 0.0, why(result)
    if name in HIDDEN_CATCHES:
        assert any(HIDDEN_CATCHES[name] in t for t in result.tampering), why(result)
    else:
        assert result.fail_to_pass[F2P] != "passed", why(result)


def test_the_canary_catches_forged_passes_when_nothing_else_looks(
    backend: SWEBackend,
    calc: SWEInstance,
    repo: Repo,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the machinery checks switched off too, a forger of every outcome passes the
    grader's always-failing tests, and that alone scores 0."""
    monkeypatch.setattr(grader_module, "scan_diff", lambda diff: [])
    files = {"calc/__init__.py": attacks.FORGE_REPORTS}
    blind = _without_guard(grader_module.RUNNER_FILES)
    monkeypatch.setattr(grader_module, "RUNNER_FILES", blind)
    result = graded(backend, calc, repo.diff(files))
    assert result.reward == 0.0, why(result)
    assert result.fail_to_pass[F2P] == "passed"  # forged
    assert any("always-failing test" in t for t in result.tampering), why(result)


def _without_guard(files: dict[str, str]) -> dict[str, str]:
    """The runner with every check of ``runner_guard`` finding nothing."""
    blind = (
        "\n\nGuard.check = lambda self, origins, hot_only=False: []\n"
        "Hooks.problems = lambda self: []\n"
        "report_problems = lambda report, report_class: []\n"
    )
    return {**files, "runner_guard.py": files["runner_guard.py"] + blind}


def test_the_real_fix_scores_1_beside_harmless_code(
    backend: SWEBackend, calc: SWEInstance, repo: Repo
) -> None:
    harmless = (
        '"""Helpers."""\n\n# no sys.modules, gc or _pytest here: just comments\n'
        "import re\n\nWORD = re.compile(r'\\w+')\n\n\ndef words(text):\n"
        "    return WORD.findall(text)  # os._exit is not called\n"
    )
    result = graded(backend, calc, repo.diff({**FIX, "calc/words.py": harmless}))
    assert (result.reward, result.reason, result.tampering) == (1.0, "resolved", []), why(result)
    assert set(result.pass_to_pass.values()) == {"passed"}


def test_a_test_that_runs_past_the_deadline_is_killed_and_fails(
    backend: SWEBackend, calc: SWEInstance, repo: Repo
) -> None:
    hang = "import time\n\n\ndef add(a, b):\n    time.sleep(600)\n\n\nmean = add\n"
    diff = repo.diff({"calc/ops.py": hang})
    started = time.monotonic()
    result = run_sync(grade(backend, calc, diff, test_timeout=5, max_bytes=1 << 20))
    assert time.monotonic() - started < 60
    assert result.reward == 0.0
    assert "ran past 5 s" in result.test_output
    assert result.infra_error is None
    assert result.timed_out  # the fix's own hang: outcome timeout, scored 0, never dropped
