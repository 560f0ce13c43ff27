"""Grade an SWE episode: the agent's diff, minus test and pytest-config changes, in a fresh sandbox.

1. ``agent_diff``: in the agent's sandbox, ``git add -A`` and ``git diff --binary`` against
   ``base_commit`` (committed, staged, unstaged and new untracked files alike; ``.gitignore``d
   files are left out). A diff over ``max_bytes`` is not graded (reward 0).
2. ``grade``: a FRESH sandbox from the same backend (the agent's sandbox, its processes and
   files outside the repository play no part), the diff applied with ``git apply``, then every
   change to a protected path reverted (``protected_reason`` is the rule), then ``test_patch``
   applied, then pytest run on the files holding ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` through a
   runner that imports pytest before the repository is on ``sys.path`` (a ``pytest.py`` in the
   repository cannot stand in for it) and records each test's outcome with its own plugin.
   The report is written outside the repository and carries a nonce the runner read from its
   stdin, so a file the agent planted cannot pass for it. A test absent from the report, skipped,
   xfailed or erroring counts as failed. Reward 1 only when every listed test passed.

Not defended: code of the agent that, imported by the tests, patches pytest or the runner from
inside their process (deliberate tampering with the test framework; review such diffs).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from agentgym.core.errors import SandboxError, SandboxFileError
from agentgym.envs.swe.backends import REPO_DIR, SWEBackend
from agentgym.envs.swe.instances import SWEInstance
from agentgym.envs.swe.runner import RUNNER
from agentgym.sandbox import Sandbox

__all__ = [
    "GradeResult",
    "agent_diff",
    "grade",
    "outcomes_of",
    "patch_paths",
    "protected_reason",
]

GIT_TIMEOUT = 120.0
OUTPUT_EXCERPT = 4000
DIFF_FILE = ".agentgym-diff"  # in the work dir, outside the repository
GRADER_DIR = ".agentgym-grader"
_GIT = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.quotePath=false"
# $1: output file, $2: bytes to keep, $3: base commit. Prints git diff's exit status, or
# "too_large <file>" for a changed file over the limit (git add could not even store some).
# No git process of the agent can be running: its commands' processes all ended with them.
_DIFF_SCRIPT = f"""rm -rf -- "$1" .git/index.lock
big=$({_GIT} ls-files -z --others --modified --exclude-standard \
  | xargs -0 -r stat -c '%s %n' -- 2>/dev/null | awk -v max="$2" '$1 >= max {{print; exit}}')
[ -n "$big" ] && {{ echo "too_large $big"; exit 0; }}
{_GIT} add -A -- . || exit 3
{_GIT} diff --cached --binary --full-index --no-color --no-ext-diff --no-textconv --no-renames \
  "$3" -- | head -c "$2" > "$1"
echo "${{PIPESTATUS[0]}}"
"""
_PYTEST_SECTION = re.compile(r"^\s*\[(pytest|tool:pytest|tool\.pytest[\w.\-]*)\]", re.MULTILINE)
_CONFIG_FILES = frozenset({"tox.ini", "setup.cfg", "pyproject.toml"})


@dataclass
class GradeResult:
    """What grading found; ``reward`` is 1.0 only when every listed test passed."""

    reward: float
    reason: str
    """``resolved``, ``tests_failed``, ``diff_too_large``, ``no_diff`` (the diff could not be
    read), ``patch_failed`` (it does not apply) or ``infra_error``."""
    agent_diff: str = ""
    graded_diff: str = ""
    dropped: dict[str, str] = field(default_factory=dict)
    """Changed paths left out of grading, with why."""
    fail_to_pass: dict[str, str] = field(default_factory=dict)
    """Test id -> ``passed``, ``failed``, ``error``, ``skipped``, ``xfail``, ``xpass`` or
    ``missing``."""
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    test_output: str = ""
    infra_error: str | None = None

    @property
    def resolved(self) -> bool:
        return self.reward == 1.0


def excerpt(text: str, limit: int, *, tail: float = 0.5) -> str:
    """``text`` cut to about ``limit`` characters, keeping its start and (``tail`` of) its end."""
    if len(text) <= limit:
        return text
    end = int(limit * tail)
    start = limit - end
    cut = len(text) - limit
    return f"{text[:start]}\n... ({cut} characters cut) ...\n{text[len(text) - end :]}"


def patch_paths(patch: str) -> set[str]:
    """Paths a unified git diff touches (old and new names)."""
    paths = set()
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t", 1)[0].strip().strip('"')
            if name != "/dev/null":
                paths.add(name[2:] if name[:2] in ("a/", "b/") else name)
    return paths


def protected_reason(path: str, test_patch_paths: set[str]) -> str | None:
    """Why a change to ``path`` (relative to the repository root) is not graded, or ``None``.

    Protected: files ``test_patch`` touches; anything under a ``tests`` or ``test`` directory;
    ``test_*.py`` and ``*_test.py``; every ``conftest.py``; ``pytest.ini`` / ``.pytest.ini``;
    package metadata (``*.dist-info`` / ``*.egg-info``, which can register pytest plugins).
    ``tox.ini``, ``setup.cfg`` and ``pyproject.toml`` are protected when their old or new text
    has a pytest section; ``config_reason`` checks that.
    """
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else path
    if path in test_patch_paths:
        return "touched by test_patch"
    if any(part in ("tests", "test") for part in parts):
        return "in a test directory"
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return "a test module"
    if name == "conftest.py":
        return "a pytest conftest.py"
    if name in ("pytest.ini", ".pytest.ini"):
        return "pytest configuration"
    if any(part.endswith((".dist-info", ".egg-info")) for part in parts):
        return "package metadata (it can register pytest plugins)"
    return None


def config_reason(old: str, new: str) -> str | None:
    if _PYTEST_SECTION.search(old) or _PYTEST_SECTION.search(new):
        return "pytest configuration"
    return None


async def agent_diff(
    sandbox: Sandbox, instance: SWEInstance, *, max_bytes: int
) -> tuple[bytes | None, str]:
    """The agent's diff against ``base_commit`` and ``""``, or ``None`` and why not."""
    return await _diff(sandbox, instance.base_commit, max_bytes)


async def _diff(sandbox: Sandbox, base: str, max_bytes: int) -> tuple[bytes | None, str]:
    out = f"{sandbox.workdir}/{DIFF_FILE}"
    argv = ["bash", "-c", _DIFF_SCRIPT, "diff", out, str(max_bytes + 1), base]
    run = await sandbox.run(argv, timeout=GIT_TIMEOUT, cwd=REPO_DIR)
    status = run.stdout.strip().splitlines()[-1:] or [""]
    if status[0].startswith("too_large "):
        file = excerpt(status[0].split(" ", 2)[-1], 200)
        return None, f"diff_too_large: {file} is over {max_bytes} bytes"
    try:
        data = await sandbox.read_file(DIFF_FILE)
    except SandboxFileError:
        data = None
    if data is not None and len(data) > max_bytes:
        return None, f"diff_too_large: the diff is over {max_bytes} bytes"
    if run.timed_out or data is None or status[0] != "0":
        why = "timed out" if run.timed_out else excerpt(run.stderr.strip(), 500)
        return None, f"no_diff: git could not compute the diff ({why or run.exit_code})"
    return data, ""


async def grade(
    backend: SWEBackend,
    instance: SWEInstance,
    diff: bytes,
    *,
    test_timeout: float,
    max_bytes: int,
) -> GradeResult:
    """Apply ``diff`` (minus protected paths) and ``test_patch`` in a fresh sandbox; run tests."""
    text = diff.decode("utf-8", "replace")
    try:
        sandbox = await backend.acquire(instance)
    except SandboxError as e:
        return GradeResult(0.0, "infra_error", text, infra_error=f"{type(e).__name__}: {e}")
    try:
        result = await _grade_in(sandbox, instance, diff, test_timeout, max_bytes)
    except (SandboxError, SandboxFileError) as e:
        result = GradeResult(0.0, "infra_error", infra_error=f"{type(e).__name__}: {e}")
    finally:
        await backend.release(sandbox)
    result.agent_diff = text
    return result


async def _git(sandbox: Sandbox, *args: str) -> tuple[bool, str]:
    argv = ["bash", "-c", f'{_GIT} --literal-pathspecs "$@"', "git", *args]
    run = await sandbox.run(argv, timeout=GIT_TIMEOUT, cwd=REPO_DIR)
    return run.ok, run.stdout if run.ok else (run.stderr or run.stdout).strip()


async def _grade_in(
    sandbox: Sandbox, instance: SWEInstance, diff: bytes, test_timeout: float, max_bytes: int
) -> GradeResult:
    here = f"{sandbox.workdir}/{GRADER_DIR}"
    await sandbox.write_file(f"{GRADER_DIR}/agent.diff", diff)
    await sandbox.write_file(f"{GRADER_DIR}/test.patch", instance.test_patch)
    await sandbox.write_file(f"{GRADER_DIR}/runner.py", RUNNER)
    if diff.strip():
        ok, why = await _git(
            sandbox, "apply", "--binary", "--whitespace=nowarn", f"{here}/agent.diff"
        )
        if not ok:
            return GradeResult(0.0, "patch_failed", test_output=excerpt(why, OUTPUT_EXCERPT))
    dropped = await _drop_protected(sandbox, instance)
    graded, why = await _diff(sandbox, instance.base_commit, max_bytes)
    if graded is None:
        return GradeResult(0.0, why.split(":", 1)[0], dropped=dropped, test_output=why)
    if instance.test_patch.strip():
        ok, why = await _git(sandbox, "apply", "--whitespace=nowarn", f"{here}/test.patch")
        if not ok:
            error = f"the instance's test_patch does not apply: {excerpt(why, 500)}"
            return GradeResult(0.0, "infra_error", dropped=dropped, infra_error=error)
    result = await _run_tests(sandbox, instance, here, test_timeout)
    result.graded_diff, result.dropped = graded.decode("utf-8", "replace"), dropped
    return result


async def _changed(sandbox: Sandbox, base: str) -> list[tuple[str, str]]:
    """``(status, path)`` of every path that differs from ``base`` (new files included)."""
    ok, out = await _git(sandbox, "add", "-A", "--", ".")
    if ok:
        ok, out = await _git(
            sandbox, "diff", "--cached", "--name-status", "-z", "--no-renames", base
        )
    if not ok:
        raise SandboxError(f"git could not list the changed files: {out}")
    fields = out.split("\0")
    return [(fields[i], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]


async def _drop_protected(sandbox: Sandbox, instance: SWEInstance) -> dict[str, str]:
    """Revert every change to a protected path; return the paths with why."""
    protected = patch_paths(instance.test_patch)
    dropped: dict[str, str] = {}
    for status, path in await _changed(sandbox, instance.base_commit):
        why = protected_reason(path, protected)
        if why is None and PurePosixPath(path).name in _CONFIG_FILES:
            why = config_reason(
                await _old_text(sandbox, instance, path), await _new_text(sandbox, path)
            )
        if why is None:
            continue
        if status.startswith("A"):
            ok, out = await _git(sandbox, "rm", "-q", "-f", "--", path)
        else:
            ok, out = await _git(sandbox, "checkout", instance.base_commit, "--", path)
        if not ok:
            raise SandboxError(f"could not revert the change to {path}: {out}")
        dropped[path] = why
    return dropped


async def _old_text(sandbox: Sandbox, instance: SWEInstance, path: str) -> str:
    ok, out = await _git(sandbox, "show", f"{instance.base_commit}:{path}")
    return out if ok else ""


async def _new_text(sandbox: Sandbox, path: str) -> str:
    try:
        return (await sandbox.read_file(f"{REPO_DIR}/{path}")).decode("utf-8", "replace")
    except SandboxFileError:
        return ""


async def _run_tests(
    sandbox: Sandbox, instance: SWEInstance, here: str, test_timeout: float
) -> GradeResult:
    nonce = secrets.token_hex(16)
    request = {"nonce": nonce, "files": list(instance.test_files), "report": f"{here}/report.json"}
    run = await sandbox.run(
        ["python3", f"{here}/runner.py"],
        stdin=json.dumps(request),
        timeout=test_timeout,
        cwd=REPO_DIR,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
    )
    output = excerpt((run.stdout + run.stderr).replace(nonce, "<nonce>"), OUTPUT_EXCERPT, tail=0.8)
    if run.timed_out:
        output += f"\n(the tests ran past {test_timeout:g} s and were killed)"
    try:
        report = json.loads(await sandbox.read_file(f"{GRADER_DIR}/report.json"))
    except (SandboxFileError, ValueError):
        report = {}
    genuine = isinstance(report, dict) and report.get("nonce") == nonce
    outcomes = outcomes_of(report.get("records", []) if genuine else [])
    f2p = {t: outcomes.get(t, "missing") for t in instance.fail_to_pass}
    p2p = {t: outcomes.get(t, "missing") for t in instance.pass_to_pass}
    passed = all(s == "passed" for s in (*f2p.values(), *p2p.values()))
    reward = 1.0 if passed else 0.0
    reason = "resolved" if passed else "tests_failed"
    return GradeResult(reward, reason, fail_to_pass=f2p, pass_to_pass=p2p, test_output=output)


def outcomes_of(reports: Any) -> dict[str, str]:
    """Each test's outcome from the runner's ``[nodeid, when, outcome, xfail]`` records.

    A failing setup or teardown makes the test ``error``; a test that never ran is absent.
    """
    outcomes: dict[str, str] = {}
    if not isinstance(reports, list):
        return outcomes
    for record in reports:
        if not (isinstance(record, list) and len(record) >= 4):
            continue
        nodeid, when, outcome, xfail = record[:4]
        if not isinstance(nodeid, str) or outcomes.get(nodeid) == "error":
            continue
        if when == "call":
            expected = {"skipped": "xfail", "passed": "xpass"}.get(outcome, "failed")
            outcomes[nodeid] = expected if xfail else str(outcome)
        elif outcome == "failed":
            outcomes[nodeid] = "error"
        elif outcome == "skipped" and when == "setup":
            outcomes[nodeid] = "xfail" if xfail else "skipped"
    return outcomes
