"""Run a model's code against a task's tests in a sandbox; only a genuine pass counts.

Function format: ``harness.py`` reads a random nonce and the test snippets from stdin (so
neither is on disk), runs ``solution.py`` (the task's prompt + the model's code), then each
snippet, each under ``try``. Only after the last one does it write ``nonce passed total`` to
``result.txt``, and it exits at once with ``os._exit`` (a stray thread cannot hold it open). The
host counts a pass only when that file holds this run's nonce. So exiting early (``exit(0)``,
``os._exit``), raising ``SystemExit``, printing "PASSED", redefining ``check`` (the test code
defines it after the model's code) or patching builtins the harness uses (it keeps its own
references) never scores.

Not defended: code that attacks the harness from inside its own process, e.g. reads the nonce
out of the interpreter's memory (``gc``, frame introspection) or rewrites the tests' frames with
``sys.settrace``; and results whose ``__eq__`` always says True. Both take deliberate effort that
an RL policy is unlikely to hit on; stdio tasks have neither hole (the host compares the output).
"""

from __future__ import annotations

import hmac
import json
import secrets
from dataclasses import dataclass, field

from agentgym.core.errors import SandboxError, SandboxFileError
from agentgym.envs.code.tasks import CodeTask, StdioCase
from agentgym.sandbox import Limits, RunResult, Sandbox

__all__ = ["GradeResult", "grade", "normalise_output"]

EXCERPT = 2000  # characters of stdout / stderr kept for info and feedback

HARNESS = r"""
import json, linecache, os, sys, traceback
_exec, _compile, _write, _open, _exit = exec, compile, os.write, os.open, os._exit
_BaseException, _cache = BaseException, linecache.cache

def _format_exc():
    kind, error, tb = sys.exc_info()
    return "".join(traceback.format_exception(kind, error, tb.tb_next))  # drop the harness frame

def _load(source, name):
    _cache[name] = (len(source), None, source.splitlines(True), name)
    return _compile(source, name, "exec")

def _main():
    nonce = sys.stdin.readline().strip()
    tests = json.loads(sys.stdin.read())
    sys.stdin.close()
    with open("solution.py", encoding="utf-8") as f:
        source = f.read()
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    passed = 0
    try:
        _exec(_load(source, "solution.py"), namespace)
        loaded = True
    except _BaseException:
        _write(2, ("Your code failed before the tests ran:\n" + _format_exc()).encode())
        loaded = False
    for i, test in enumerate(tests if loaded else ()):
        try:
            _exec(_load(test, "test_%d.py" % i), namespace)
            passed += 1
        except _BaseException:
            _write(2, ("Test %d failed:\n%s" % (i, _format_exc())).encode())
    fd = _open("result.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    _write(fd, ("%s %d %d" % (nonce, passed, len(tests))).encode())
    _exit(0)

_main()
"""


@dataclass(frozen=True)
class GradeResult:
    """What grading one program found."""

    passed: int
    total: int
    exit_code: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    stdout: str = ""
    stderr: str = ""
    failure: str = ""
    """The first failing test, for the model (empty when all passed)."""
    infra_error: str | None = None
    """Why the sandbox failed underneath, or ``None``."""
    runs: list[RunResult] = field(default_factory=list, repr=False, compare=False)

    @property
    def all_passed(self) -> bool:
        return self.infra_error is None and self.total > 0 and self.passed == self.total


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """The start and end of ``text`` when it is longer than ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - limit} characters cut) ...\n{text[-half:]}"


def normalise_output(text: str) -> list[str]:
    """Lines with runs of whitespace collapsed to one space, blank lines at either end dropped."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def solution_source(task: CodeTask, code: str) -> str:
    """What ``solution.py`` holds: the prompt (imports, helpers, the stub), then the model's code.

    A complete function replaces the prompt's stub; an indented bare body continues it."""
    if task.format == "stdio" or not task.prompt:
        return code
    separator = "" if code[:1] in (" ", "\t") else "\n\n"
    return f"{task.prompt}{separator}{code}\n"


async def grade(
    sandbox: Sandbox, task: CodeTask, code: str, *, timeout: float, limits: Limits, all_: bool
) -> GradeResult:
    """Grade ``code`` on ``task`` in a freshly reset ``sandbox``; ``all_`` stops at a failure."""
    try:
        await sandbox.reset()
        await sandbox.write_file("solution.py", solution_source(task, code))
        if task.format == "function":
            return await _grade_function(sandbox, task, timeout, limits)
        return await _grade_stdio(sandbox, task, timeout, limits, stop_early=all_)
    except (SandboxError, SandboxFileError, OSError) as e:
        return GradeResult(0, task.num_tests, infra_error=f"{type(e).__name__}: {e}")


async def _grade_function(
    sandbox: Sandbox, task: CodeTask, timeout: float, limits: Limits
) -> GradeResult:
    nonce = secrets.token_hex(16)
    await sandbox.write_file("harness.py", HARNESS)
    stdin = f"{nonce}\n{json.dumps(list(task.snippets))}"
    run = await sandbox.run(["python3", "harness.py"], stdin=stdin, timeout=timeout, limits=limits)
    passed = _read_passed(await _result_file(sandbox), nonce, task.num_tests)
    stderr = run.stderr.replace(nonce, "<nonce>")
    failure = "" if passed == task.num_tests else _function_failure(run, stderr)
    return GradeResult(
        passed,
        task.num_tests,
        exit_code=run.exit_code,
        timed_out=run.timed_out,
        oom_killed=run.oom_killed,
        stdout=excerpt(run.stdout),
        stderr=excerpt(stderr),
        failure=failure,
        runs=[run],
    )


async def _result_file(sandbox: Sandbox) -> bytes:
    try:
        return await sandbox.read_file("result.txt")
    except SandboxFileError:
        return b""  # the harness never got there: an exit, a crash or a timeout


def _read_passed(data: bytes, nonce: str, total: int) -> int:
    parts = data.decode("utf-8", "replace").split()
    if len(parts) != 3 or not hmac.compare_digest(parts[0], nonce):
        return 0
    try:
        passed, reported = int(parts[1]), int(parts[2])
    except ValueError:
        return 0
    return passed if reported == total and 0 <= passed <= total else 0


def _function_failure(run: RunResult, stderr: str) -> str:
    if run.timed_out:
        return "The program ran past its time limit and was killed."
    if run.oom_killed:
        return "The program ran out of memory."
    tail = stderr.strip() or "(no output on stderr)"
    code = f" (exit code {run.exit_code})" if run.exit_code != 0 else ""
    return f"The tests did not all pass{code}:\n{excerpt(tail)}"


async def _grade_stdio(
    sandbox: Sandbox, task: CodeTask, timeout: float, limits: Limits, *, stop_early: bool
) -> GradeResult:
    passed, failure, runs = 0, "", []
    for index, case in enumerate(task.cases):
        # Keep enough stdout to compare a correct answer however long it is.
        case_limits = Limits(
            memory=limits.memory,
            processes=limits.processes,
            file_size=limits.file_size,
            cpu_seconds=limits.cpu_seconds,
            output=max(limits.output, 2 * len(case.output.encode()) + 1024),
        )
        run = await sandbox.run(
            ["python3", "solution.py"], stdin=case.input, timeout=timeout, limits=case_limits
        )
        runs.append(run)
        if run.ok and normalise_output(run.stdout) == normalise_output(case.output):
            passed += 1
            continue
        failure = failure or _stdio_failure(index, case, run)
        if stop_early:
            break
    last = runs[-1]
    return GradeResult(
        passed,
        task.num_tests,
        exit_code=last.exit_code,
        timed_out=any(r.timed_out for r in runs),
        oom_killed=any(r.oom_killed for r in runs),
        stdout=excerpt(last.stdout),
        stderr=excerpt(last.stderr),
        failure=failure,
        runs=runs,
    )


def _stdio_failure(index: int, case: StdioCase, run: RunResult) -> str:
    if run.timed_out:
        what = "ran past its time limit and was killed"
    elif run.oom_killed:
        what = "ran out of memory"
    elif run.exit_code != 0:
        what = f"exited with code {run.exit_code}"
    else:
        what = "printed a wrong answer"
    lines = [
        f"Test {index} failed: the program {what}.",
        f"Input:\n{excerpt(case.input, 500)}",
        f"Expected output:\n{excerpt(case.output, 500)}",
        f"Your output:\n{excerpt(run.stdout, 500)}",
    ]
    if run.stderr.strip():
        lines.append(f"Stderr:\n{excerpt(run.stderr.strip(), 1000)}")
    return "\n".join(lines)
