"""Grade an SWE episode: the agent's diff, minus test and pytest-config changes, in a fresh sandbox.

1. ``agent_diff``: in the agent's sandbox, ``git add -A`` and ``git diff --binary`` against
   ``base_commit``, or the image's own commit on top of it (``diff_base``): committed, staged,
   unstaged and new untracked files alike; ``.gitignore``d files are left out. A diff over
   ``max_bytes`` is not graded (reward 0).
2. ``grade``: a FRESH sandbox from the same backend (the agent's sandbox, its processes and
   files outside the repository play no part), the diff applied with ``git apply``, then every
   change to a protected path reverted (``protected_reason`` is the rule), then the graded diff
   scanned for tampering, then ``test_patch`` applied, then pytest run on the files holding
   ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` by the runner (``agentgym.envs.swe.runner``). A test
   absent from the verdict, skipped, xfailed or erroring counts as failed. Reward 1 only when
   every listed test passed and no layer below found tampering.

Why outcomes are hard to forge. The graded tests import the agent's code, and code running in
a process can change anything that process reports: no single in-process report can be
trusted. So the outcome rests on layers, each of which a forger must beat:

- The diff is scanned before anything of it runs (``agentgym.envs.swe.tampering``): a fix that
  touches pytest or pluggy, ``sys.modules``, ``builtins``, ``gc``, ``atexit``, ``os._exit``,
  import hooks, frames and tracing, ``exec``/``ctypes``, start-up files (``sitecustomize``,
  ``.pth``), compiled code, or shadows a standard module scores 0 with the findings in
  ``tampering``, and the tests do not run.
- Outcomes are decided outside the process that runs the agent's code. The runner's
  supervisor (which never imports the repository) forks the test process and reads each test
  report's record from a pipe as the report is made (nothing waits in the test process's memory
  to be rewritten); the verdict goes to the grader on the supervisor's stdout, which the test
  process does not hold and, the supervisor being non-dumpable, cannot reach through ``/proc``.
  The verdict must carry a nonce the test process never has (it reaches the supervisor on
  stdin, straight into a buffer the test process zeroes in its copy at once); every line the
  test process sends must carry a token it sent before any code of the repository ran, and a
  record sent twice, a line after its last or an exit without its last line is tampering.
  Files the agent plants, lines it prints, ``os._exit`` / ``sys.exit`` / ``atexit`` tricks or a
  killed runner therefore leave tests missing (failed), never passed.
- Canary tests the agent's code cannot know in advance: each run adds a test file with two
  always-failing tests under random names (``runner.make_canary``), run last. Any trick that
  turns failures into passes wholesale (patching ``TestReport``, ``pytest_runtest_makereport``,
  ``CallInfo``, ``unittest``'s assertions, blanking test functions, rewriting the records)
  passes the canary too, and a canary reported passing, or not reported failing while every
  graded test passed, is tampering.
- The test machinery is checked during and after the run (``runner_guard``): at each report,
  that it is a real ``TestReport`` whose outcome agrees with its failure details and that its
  test function (and that function's code) is the one collected; at each call report, that
  pytest's reporting path, pluggy, ``json.encoder`` and the runner are the objects they were
  before the repository was imported (code objects included) and that every implementation of
  a reporting hook comes from the system's folders or an unchanged file of the repository;
  after the run, the same for all of pytest, pluggy, unittest, ``builtins``, ``os`` and
  ``sys``, no import hook added and no trace function left set. The supervisor then compares
  the repository's code, configuration and test files with their state before the run (a test
  process that rewrites a test file, plants a conftest.py or a ``.pyc`` is caught). A change
  made by code from a file the system or the unchanged repository provides (pytest's own
  plugins, a conftest.py) is not counted.

- No value the code under test returns can answer a graded comparison
  (``agentgym.envs.swe.runner_compare``). A scan cannot find an object whose ``__eq__``
  always answers ``True`` (its class can be built at run time), and the test process cannot
  be kept from running it; so the runner owns how the tests' comparisons are evaluated
  instead. It wraps pytest's assertion rewriting, which every test module goes through (no
  cached rewrite is loaded): each comparison in a graded test module, each ``assert``'s truth
  and ``unittest``'s ``assertEqual`` family first pass their operands through ``Plain``. An
  operand from which no object of a *forged* class can be reached (following the
  interpreter's own references, not the object's methods) is used as written, so the
  repository's own ``__eq__`` and ``pytest.approx`` keep their meaning and gold patches score
  as before; otherwise it is replaced by plain data: a ``str`` / ``int`` / ``float`` / ...
  subclass by the exact builtin value of its contents, read through the base type's own
  methods, containers rebuilt from their elements' plain forms, and any other object by its
  exact class and its attributes' plain forms. A class is forged when one of its comparison
  or truth methods is code the graded diff wrote (lines it adds or removes, a file it adds,
  a function put under another name, a non-function), which includes a repository class
  whose ``__eq__`` the agent's code replaced at run time. A name a test module imported and
  that is rebound later (the agent reaching into the test module) is put back before each
  test and is tampering.

Residual risk, honestly: inside its process the agent's code is as powerful as the runner's.
Code written against this grader in particular, and obfuscated past the scan (names built at
run time, ``getattr`` with computed strings), can still reach the test process's report
through ``gc`` or frames, tell the canary from the real tests, make its change and undo it
between two checks, or read the expected values out of the test's source or frames and
return them (honest values, found by cheating). ``unittest.mock.ANY`` and
``pytest.approx`` count as forged except in a test module that names them, where the code
under test could still return one; a repository's own lenient test helper (an object equal to
anything) is trusted like any unchanged code, and so is a repository method the diff leaves
unchanged even when it calls code the diff changed. Truth and membership of an object of a class the
diff defines are that class's own answer (``assert cache``, ``assert key in cache`` test
that class). Tests that spawn their own Python processes run the agent's code outside the
guard entirely. What no layer covers is named in the checks'
docstrings; diffs with ``tampering`` findings, and any resolved diff of a reward you act on,
deserve review. A fix that legitimately needs what the scan flags (a pytest plugin's own
repository, an import-hook library) scores 0: grade such tasks with the scan's findings in view.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any

from agentgym.core.errors import SandboxError, SandboxFileError
from agentgym.envs.swe.backends.base import BASE_REF, REPO_DIR, SWEBackend
from agentgym.envs.swe.instances import SWEInstance
from agentgym.envs.swe.runner import (
    RUNNER_FILES,
    canary_problems,
    make_canary,
    read_verdict,
    request,
)
from agentgym.envs.swe.tampering import scan_diff
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
RUNNER_GRACE = 30.0
VERDICT_BYTES = 64 * 1024 * 1024
"""Output the graded run keeps: room for the runner's one-line verdict of a suite of thousands
of tests (SWE-bench tasks list hundreds; a sandbox keeps 64 KiB by default, and a verdict cut
there read as tampering, gold patches included). The tests' own output on stderr is cut to an
excerpt after the run."""
"""Seconds the runner may take beyond ``test_timeout`` to stop the tests and report."""
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
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)")


@dataclass
class GradeResult:
    """What grading found; ``reward`` is 1.0 only when every listed test passed and nothing
    was judged tampering."""

    reward: float
    reason: str
    """``resolved``, ``tests_failed``, ``tampering``, ``diff_too_large``, ``no_diff`` (the diff
    could not be read), ``patch_failed`` (it does not apply) or ``infra_error``."""
    agent_diff: str = ""
    graded_diff: str = ""
    dropped: dict[str, str] = field(default_factory=dict)
    """Changed paths left out of grading, with why."""
    fail_to_pass: dict[str, str] = field(default_factory=dict)
    """Test id -> ``passed``, ``failed``, ``error``, ``skipped``, ``xfail``, ``xpass``,
    ``missing`` or ``not_run`` (tampering was found in the diff before the tests ran)."""
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    test_output: str = ""
    """The tests' output (start and end); it includes the canary's two failing tests."""
    infra_error: str | None = None
    tampering: list[str] = field(default_factory=list)
    """Why the diff or the test run was judged to tamper with the interpreter or the test
    runner (each finding a sentence); empty when nothing was. Non-empty means reward 0."""
    timed_out: bool = False
    """The graded tests ran past their deadline and were killed (the tests left unfinished
    failed): the code under test's own hang, a scored outcome, never an infrastructure error."""

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


def changed_lines(patch: str) -> dict[str, list[int]]:
    """For each file a unified git diff changes, the line numbers of its new text that the
    diff adds, or before which it removes lines."""
    changed: dict[str, list[int]] = {}
    current: list[int] | None = None
    in_header, line_no = False, 0
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            current, in_header = None, True
        elif in_header and line.startswith("+++ "):
            name = line[4:].split("\t", 1)[0].strip().strip('"')
            current = None if name == "/dev/null" else changed.setdefault(name[2:], [])
        elif line.startswith("@@ "):
            match = _HUNK.match(line)
            in_header, line_no = False, int(match.group(1)) if match else 0
        elif in_header or current is None:
            continue
        elif line.startswith("+"):
            current.append(line_no)
            line_no += 1
        elif line.startswith("-"):
            current.append(line_no)
        elif line.startswith(" "):
            line_no += 1
    return changed


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
    """The agent's diff against ``diff_base`` and ``""``, or ``None`` and why not."""
    return await _diff(sandbox, await diff_base(sandbox, instance), max_bytes)


async def diff_base(sandbox: Sandbox, instance: SWEInstance) -> str:
    """What diffs are taken against: the commit ``BASE_REF`` names in the sandbox's repository
    (an image's own commit on top of ``base_commit``, set when the sandbox was made), else
    ``base_commit``. Moving the ref in the agent's sandbox changes only the agent's own diff;
    grading takes the ref of a fresh sandbox."""
    ok, out = await _git(sandbox, "rev-parse", "--verify", "-q", f"{BASE_REF}^{{commit}}")
    return out.strip() if ok and out.strip() else instance.base_commit


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


async def _git(sandbox: Sandbox, *args: str, stdin: str | bytes | None = None) -> tuple[bool, str]:
    argv = ["bash", "-c", f'{_GIT} --literal-pathspecs "$@"', "git", *args]
    run = await sandbox.run(argv, stdin=stdin, timeout=GIT_TIMEOUT, cwd=REPO_DIR)
    return run.ok, run.stdout if run.ok else (run.stderr or run.stdout).strip()


async def _grade_in(
    sandbox: Sandbox, instance: SWEInstance, diff: bytes, test_timeout: float, max_bytes: int
) -> GradeResult:
    # The patches go in on stdin: no file in the sandbox tells the tests which ones are new.
    for name, source in RUNNER_FILES.items():
        await sandbox.write_file(f"{GRADER_DIR}/{name}", source)
    if diff.strip():
        ok, why = await _git(sandbox, "apply", "--binary", "--whitespace=nowarn", stdin=diff)
        if not ok:
            return GradeResult(0.0, "patch_failed", test_output=excerpt(why, OUTPUT_EXCERPT))
    base = await diff_base(sandbox, instance)
    dropped = await _drop_protected(sandbox, instance, base)
    graded, why = await _diff(sandbox, base, max_bytes)
    if graded is None:
        return GradeResult(0.0, why.split(":", 1)[0], dropped=dropped, test_output=why)
    graded_text = graded.decode("utf-8", "replace")
    findings = scan_diff(graded_text)
    if findings:
        result = _not_run(instance, findings)
    else:
        if instance.test_patch.strip():
            ok, why = await _git(sandbox, "apply", "--whitespace=nowarn", stdin=instance.test_patch)
            if not ok:
                error = f"the instance's test_patch does not apply: {excerpt(why, 500)}"
                return GradeResult(0.0, "infra_error", dropped=dropped, infra_error=error)
        changed = sorted(patch_paths(graded_text))
        lines = changed_lines(graded_text)
        result = await _run_tests(sandbox, instance, changed, lines, test_timeout)
    result.graded_diff, result.dropped = graded_text, dropped
    return result


def _not_run(instance: SWEInstance, findings: list[str]) -> GradeResult:
    return GradeResult(
        0.0,
        "tampering",
        fail_to_pass=dict.fromkeys(instance.fail_to_pass, "not_run"),
        pass_to_pass=dict.fromkeys(instance.pass_to_pass, "not_run"),
        test_output="The tests were not run: the diff tampers with the interpreter or the "
        "test runner.\n" + "\n".join(findings),
        tampering=findings,
    )


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


async def _drop_protected(sandbox: Sandbox, instance: SWEInstance, base: str) -> dict[str, str]:
    """Revert every change to a protected path (to ``base``); return the paths with why."""
    protected = patch_paths(instance.test_patch)
    dropped: dict[str, str] = {}
    for status, path in await _changed(sandbox, base):
        why = protected_reason(path, protected)
        if why is None and PurePosixPath(path).name in _CONFIG_FILES:
            why = config_reason(
                await _old_text(sandbox, base, path), await _new_text(sandbox, path)
            )
        if why is None:
            continue
        if status.startswith("A"):
            ok, out = await _git(sandbox, "rm", "-q", "-f", "--", path)
        else:
            ok, out = await _git(sandbox, "checkout", base, "--", path)
        if not ok:
            raise SandboxError(f"could not revert the change to {path}: {out}")
        dropped[path] = why
    return dropped


async def _old_text(sandbox: Sandbox, base: str, path: str) -> str:
    ok, out = await _git(sandbox, "show", f"{base}:{path}")
    return out if ok else ""


async def _new_text(sandbox: Sandbox, path: str) -> str:
    try:
        return (await sandbox.read_file(f"{REPO_DIR}/{path}")).decode("utf-8", "replace")
    except SandboxFileError:
        return ""


async def _run_tests(
    sandbox: Sandbox,
    instance: SWEInstance,
    changed: list[str],
    lines: dict[str, list[int]],
    test_timeout: float,
) -> GradeResult:
    nonce = secrets.token_hex(16)
    canary = make_canary(instance.test_files)
    tests = [*instance.fail_to_pass, *instance.pass_to_pass]
    files = list(instance.test_files)
    stdin = request(nonce, files, tests, canary, changed, test_timeout, lines=lines)
    run = await sandbox.run(
        ["python3", "-I", f"{sandbox.workdir}/{GRADER_DIR}/runner.py"],
        stdin=stdin,
        timeout=test_timeout + RUNNER_GRACE,
        limits=replace(sandbox.limits, output=max(sandbox.limits.output, VERDICT_BYTES)),
        cwd=REPO_DIR,
        env={"PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"},
    )
    verdict = read_verdict(run.stdout, nonce) or {}
    if verdict.get("error"):
        return GradeResult(0.0, "infra_error", infra_error=f"the runner: {verdict['error']}")
    output = excerpt(run.stderr.replace(nonce, "<nonce>"), OUTPUT_EXCERPT, tail=0.8)
    timed_out = bool(run.timed_out or verdict.get("timed_out"))
    if timed_out:
        output += f"\n(the tests ran past {test_timeout:g} s and were killed)"
    outcomes = outcomes_of(verdict.get("records", []))
    f2p = {t: outcomes.get(t, "missing") for t in instance.fail_to_pass}
    p2p = {t: outcomes.get(t, "missing") for t in instance.pass_to_pass}
    passed = all(s == "passed" for s in (*f2p.values(), *p2p.values()))
    tampering = [str(p) for p in verdict.get("problems", [])]
    if run.stdout.strip() and not verdict:
        tampering.append("the runner's verdict was missing its nonce or malformed")
    tampering += canary_problems(canary, outcomes, passed)
    resolved = passed and not tampering
    reason = "resolved" if resolved else "tampering" if tampering else "tests_failed"
    return GradeResult(
        1.0 if resolved else 0.0,
        reason,
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        test_output=output,
        tampering=tampering,
        timed_out=timed_out and not resolved,
    )


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
