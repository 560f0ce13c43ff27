"""Run a model's code against a task's tests in a sandbox; only a genuine pass counts.

Stdio format: each case runs ``python3 solution.py`` with the case's input on stdin; the host
compares the captured stdout (whitespace-normalised, and only when none of it was cut) with the
expected output, which never enters the sandbox. No code the model influences takes part in
the comparison.

Function format: the tests call the model's functions and compare what they return, so the
comparison must not run where the model's code runs. Layers, each closing what the one before
leaves open:

1. **Plain data only.** The tests run in the checker process (``checker``), where the model's
   code never runs. Each function under test is a proxy there: a call sends its arguments to
   the candidate process (``candidate``), which runs the answer, and gets back JSON that the
   checker rebuilds from exact builtin types (``plain``: ``None``, ``bool``, ``int``,
   ``float``, ``complex``, ``str``, ``bytes`` and lists, tuples, dicts, sets, frozensets of
   them). An object whose class overrides ``__eq__``, ``__abs__``, ``__sub__``, ... or a
   subclass of a builtin never reaches a comparison: the candidate cannot encode it, and
   whatever it sends instead is decoded as plain data. An exception comes back as a builtin
   exception type with plain arguments; a crash, ``exit``, ``os._exit``, ``SystemExit``,
   ``KeyboardInterrupt`` or any other ``BaseException``, a result that is not plain data, or
   one over 16 MiB or nested over 100 levels fails that test even when the test code catches
   it. The task's prompt runs in the checker too, so its helpers (HumanEval's ``poly``,
   ``encode_cyclic``) are the task's, not the answer's, and the tests see the builtins, not
   names the answer defines.
2. **A checker the candidate cannot reach.** Both processes run in the sandbox as the same
   user, so the checker makes itself non-dumpable before it reads anything (no ptrace, no
   ``/proc/<pid>/mem``, ``environ`` or ``fd`` of it for a process without ``CAP_SYS_PTRACE``,
   which the sandboxes drop), blocks every signal that can be blocked, imports nothing from a
   writable folder (``python -I``, writable folders dropped from ``sys.path``), and gets the
   tests and the prompt on its stdin: they are never on disk, and the candidate holds no
   descriptor but its own pipes. It can still kill or stop the checker, or exhaust the run's
   time or memory: each of those leaves no verdict, which scores 0.
3. **A verdict only the checker can write.** The checker's stdout carries nothing but the
   verdict (``print`` in the checker goes to stderr; the candidate's stdout is a pipe the
   checker drains). The host accepts a verdict only when it carries this run's nonce, a random
   value that only the checker's stdin carried, and only when the verdict counts exactly the
   task's tests. No verdict, a truncated one or a wrong nonce means 0 tests passed.

Residual risk: an escape from the sandbox or a kernel bug that gives ptrace rights is out of
reach of all three; without an isolating sandbox (``isolation="none"``) the answer runs as the
host's user and can attack the host process itself. Inside the local sandbox the answer can
trace the sandbox's helper process (same user): that lets it fake the run's exit status or kill
the run, which the verdict does not depend on. A test that passes its expected value as an
argument shows it to the answer. Behaviour differs from running the tests next to the code:
results must be plain data (a ``Counter``, a ``namedtuple``, a generator or an object of the
answer's own class fails, even where ``==`` would have said True; the candidate sends numpy
scalars as the builtin values they hold), the answer cannot change the tests' arguments in
place, and tests must import their own helpers: a name the tests use that
nothing trusted defines is looked up in the answer (a function becomes a proxy, so a test that
compares through, say, an ``isclose`` only the answer imported trusts the answer's; a standard
module is imported by the checker itself; anything else stays undefined). Each run costs a
second Python start-up (``benchmarks/humaneval_sandbox.py``); both processes skip ``site``
unless what they run imports beyond the standard library.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hmac
import json
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

from agentgym.core.errors import SandboxError, SandboxFileError
from agentgym.envs.code.packages import missing_module_hint
from agentgym.envs.code.tasks import CodeTask, StdioCase
from agentgym.sandbox import Limits, RunResult, Sandbox

__all__ = ["GradeResult", "Verdict", "grade", "normalise_output", "read_verdict"]

EXCERPT = 2000  # characters of stdout / stderr kept for info and feedback
VERDICT_BYTES = 256 * 1024  # stdout a function-format run keeps: the verdict fits whole
_HERE = Path(__file__).parent
CHECKER = (_HERE / "plain.py").read_text() + (_HERE / "checker.py").read_text()
"""The checker's program (``python3 -I -c CHECKER``): the plain-data codec, then ``checker``."""
CANDIDATE = (_HERE / "plain.py").read_text() + (_HERE / "candidate.py").read_text()
"""The candidate's program: the plain-data codec, then ``candidate``."""


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
    """The answer's program: the prompt (imports, helpers, the stub), then the model's code
    (``solution.py`` of a stdio task; the candidate runs it for a function task).

    A complete function replaces the prompt's stub; an indented bare body continues it."""
    if task.format == "stdio" or not task.prompt:
        return code
    separator = "" if code[:1] in (" ", "\t") else "\n\n"
    return f"{task.prompt}{separator}{code}\n"


async def grade(
    sandbox: Sandbox,
    task: CodeTask,
    code: str,
    *,
    timeout: float,
    limits: Limits,
    all_: bool,
    packages: Sequence[str] = (),
) -> GradeResult:
    """Grade ``code`` on ``task`` in a freshly reset ``sandbox``; ``all_`` stops at a failure.

    ``packages`` (the modules the sandbox offers beyond the standard library) are named to the
    model when its code imports a module the sandbox lacks."""
    try:
        await sandbox.reset()
        if task.format == "function":
            result = await _grade_function(sandbox, task, code, timeout, limits)
        else:
            await sandbox.write_file("solution.py", solution_source(task, code))
            result = await _grade_stdio(sandbox, task, timeout, limits, stop_early=all_)
    except (SandboxError, SandboxFileError, OSError) as e:
        return GradeResult(0, task.num_tests, infra_error=f"{type(e).__name__}: {e}")
    hint = missing_module_hint(result.failure, packages) if result.failure else ""
    return dataclasses.replace(result, failure=result.failure + hint) if hint else result


async def _grade_function(
    sandbox: Sandbox, task: CodeTask, code: str, timeout: float, limits: Limits
) -> GradeResult:
    nonce = secrets.token_hex(16)
    source = solution_source(task, code)
    job = {
        "source": source,
        "prompt": task.prompt,
        "snippets": list(task.snippets),
        "entry": sorted(functions_under_test(task.prompt, task.snippets)),
        "candidate": CANDIDATE,
        "candidate_site": imports_beyond_stdlib(source),
    }
    tests_site = imports_beyond_stdlib(task.prompt, *task.snippets)
    run = await sandbox.run(
        ["python3", "-I" if tests_site else "-IS", "-c", CHECKER],
        stdin=f"{nonce}\n{json.dumps(job)}",
        timeout=timeout,
        limits=_checker_limits(limits),
    )
    verdict = read_verdict(run, nonce, task.num_tests)
    stderr = run.stderr.replace(nonce, "<nonce>")
    passed = verdict.passed if verdict.error is None else 0
    failure = "" if passed == task.num_tests else _function_failure(run, stderr)
    return GradeResult(
        passed,
        task.num_tests,
        exit_code=run.exit_code,
        timed_out=run.timed_out,
        oom_killed=run.oom_killed,
        stdout=excerpt(verdict.stdout),
        stderr=excerpt(stderr),
        failure=failure,
        infra_error=verdict.error,
        runs=[run],
    )


@functools.lru_cache(maxsize=1024)
def functions_under_test(prompt: str, snippets: tuple[str, ...]) -> frozenset[str]:
    """The answer's functions the tests call by these names: the prompt's stubs (a body of only
    a docstring, ``pass``, ``...`` or ``raise``) and every name a top-level ``check(...)`` of a
    snippet receives. (The checker also asks for names the tests use that nothing defines.)"""
    found = set()
    # A prompt a body continues does not parse: the checker asks the answer for every name used.
    with contextlib.suppress(SyntaxError):
        found |= {node.name for node in ast.parse(prompt).body if _is_stub(node)}
    for snippet in snippets:
        try:
            tree = ast.parse(snippet)
        except SyntaxError:
            continue
        for statement in tree.body:
            call = statement.value if isinstance(statement, ast.Expr) else None
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "check":
                found |= {arg.id for arg in call.args if isinstance(arg, ast.Name)}
    return frozenset(found)


@functools.lru_cache(maxsize=1024)
def imports_beyond_stdlib(*sources: str) -> bool:
    """Whether ``sources`` import a module outside the standard library, may import one by a
    name only known when they run (``__import__``, ``import_module``), or do not parse: a
    process that runs them then needs ``site`` (site-packages); one that does not starts
    faster without it (``python -S``)."""
    for source in sources:
        try:
            tree = ast.parse(source)
        except Exception:  # a syntax error, or code nested too deeply to parse
            return True
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
            if name in ("__import__", "import_module"):
                return True
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(name.split(".")[0] not in sys.stdlib_module_names for name in names):
                return True
    return False


def _is_stub(node: ast.stmt) -> TypeGuard[ast.FunctionDef | ast.AsyncFunctionDef]:
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    return all(
        isinstance(statement, ast.Pass | ast.Raise)
        or (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))
        for statement in node.body
    )


def _checker_limits(limits: Limits) -> Limits:
    """``limits`` with room for the checker: one more process, and its verdict kept whole."""
    return dataclasses.replace(
        limits,
        processes=None if limits.processes is None else limits.processes + 1,
        output=max(limits.output, VERDICT_BYTES),
    )


@dataclass(frozen=True)
class Verdict:
    """What the checker reported, once its nonce matched (else a pass count of 0)."""

    passed: int = 0
    stdout: str = ""
    """The candidate's stdout (the checker kept the first 16 KiB)."""
    error: str | None = None
    """Why the checker could not grade (it could not protect itself): an infrastructure error."""


def read_verdict(run: RunResult, nonce: str, total: int) -> Verdict:
    """The checker's verdict on ``run``'s stdout; no pass unless it carries ``nonce``.

    A run whose checker died, was killed or timed out before it wrote one has no verdict."""
    try:
        data = json.loads(run.stdout) if not run.stdout_truncated else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("nonce"), str):
        return Verdict()
    if not hmac.compare_digest(data["nonce"].encode(), nonce.encode()):
        return Verdict()
    passed, reported, stdout = data.get("passed"), data.get("total"), data.get("stdout", "")
    if type(passed) is not int or reported != total or not 0 <= passed <= total:
        return Verdict()
    error = data.get("error")
    return Verdict(
        passed,
        stdout if isinstance(stdout, str) else "",
        None if error is None else f"checker: {error}",
    )


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
        if (
            run.ok
            and not run.stdout_truncated
            and normalise_output(run.stdout) == normalise_output(case.output)
        ):
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
