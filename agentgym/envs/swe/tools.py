"""The SWE env's tools: ``view``, ``search``, ``edit``, ``create``, ``bash``, ``run_tests``,
``submit``. Each runs in the episode's sandbox with the repository as working directory and
answers with text: a model's mistake, a failing command or a timeout is a result, never an
exception. Calls of one turn run one after another, in order; after ``submit`` none runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from agentgym.core.errors import SandboxError, SandboxFileError
from agentgym.core.tools import Tool, ToolCallFailed, clip
from agentgym.envs.swe.backends.base import REPO_DIR
from agentgym.envs.swe.grader import excerpt
from agentgym.envs.swe.scripts import CREATE, EDIT, VIEW
from agentgym.sandbox import RunResult, Sandbox

__all__ = ["RepoTools"]

_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}  # keep __pycache__ out of the work tree
_SEARCH = (
    'grep -rnI --color=never --exclude-dir=.git --exclude-dir=__pycache__ "$1" -e "$2" -- "$3"'
    ' | head -n "$4"; exit "${PIPESTATUS[0]}"'
)
MAX_MATCHES = 200
MAX_ARGUMENT = 100_000  # characters of a command line argument (Linux allows 128 KiB each)
MAX_PATH = 4096


def _check_path(path: str) -> None:
    if len(path) > MAX_PATH or "\0" in path:
        raise ToolCallFailed(f"{clip(path, 100)!r} is not a valid path")


class RepoTools:
    """The tools of one env; ``sandbox`` is the current episode's (set by the env).

    Args:
        command_timeout: seconds ``bash``, ``view``, ``search``, ``edit`` and ``create`` may run.
        test_timeout: seconds ``run_tests`` may run.
        max_output: characters of a tool's answer (longer output keeps its start and end).
    """

    def __init__(self, *, command_timeout: float, test_timeout: float, max_output: int) -> None:
        self.command_timeout, self.test_timeout = command_timeout, test_timeout
        self.max_output = max_output
        self.sandbox: Sandbox | None = None
        self.submitted = False
        self.infra_error: str | None = None
        self.timeouts = 0
        """Commands of the episode that ran into their deadline (each killed): the model's own
        ``sleep`` or endless loop, scored as a step that ``timed_out``, never dropped."""
        self._lock = asyncio.Lock()

    def start(self, sandbox: Sandbox | None) -> None:
        """Begin an episode in ``sandbox``."""
        self.sandbox, self.submitted, self.infra_error = sandbox, False, None
        self.timeouts = 0

    def tools(self) -> tuple[Tool, ...]:
        functions = (
            self.view,
            self.search,
            self.edit,
            self.create,
            self.bash,
            self.run_tests,
            self.submit,
        )
        return tuple(Tool.from_function(fn, name=fn.__name__) for fn in functions)

    # --- running -----------------------------------------------------------------------------

    async def _run(
        self, argv: list[str], *, stdin: str | None = None, timeout: float | None = None
    ) -> RunResult:
        """Run ``argv`` in the repository, one call at a time; a broken sandbox ends the turn."""
        async with self._lock:
            if self.submitted:
                raise ToolCallFailed("the work was already submitted; this call did not run")
            if self.sandbox is None or self.infra_error is not None:
                raise ToolCallFailed("the sandbox is unavailable (not your fault)")
            try:
                run = await self.sandbox.run(
                    argv,
                    stdin=stdin,
                    timeout=timeout or self.command_timeout,
                    cwd=REPO_DIR,
                    env=_ENV,
                )
                self.timeouts += run.timed_out
                return run
            except (SandboxError, SandboxFileError) as e:
                self.infra_error = f"{type(e).__name__}: {e}"
                raise ToolCallFailed(
                    f"the sandbox failed (not your fault): {clip(str(e), 200)}"
                ) from None

    async def _script(self, script: str, arguments: Mapping[str, Any]) -> str:
        _check_path(arguments["path"])
        run = await self._run(["python3", "-c", script], stdin=json.dumps(arguments))
        if run.timed_out:
            raise ToolCallFailed(f"timed out after {self.command_timeout:g} s")
        text = run.stdout if run.exit_code in (0, 1) else f"{run.stdout}\n{run.stderr}"
        text = excerpt(text.rstrip("\n"), self.max_output)
        if run.exit_code == 1 and text.startswith("Error: "):
            raise ToolCallFailed(text.removeprefix("Error: "))
        if run.exit_code not in (0, 1):
            raise ToolCallFailed(f"the tool failed (exit code {run.exit_code}): {text}")
        return text

    def _result(self, run: RunResult, timeout: float, *, tail: float = 0.5) -> str:
        parts = []
        if run.stdout:
            parts.append(run.stdout.rstrip("\n"))
        if run.stderr:
            parts.append(f"[stderr]\n{run.stderr.rstrip()}")
        body = excerpt("\n".join(parts), self.max_output, tail=tail) if parts else "(no output)"
        if run.timed_out:
            status = f"timed out after {timeout:g} s; every process it started was killed"
        else:
            status = f"exit code {run.exit_code}"
        cut = "; output cut" if run.truncated or len("\n".join(parts)) > self.max_output else ""
        return f"{body}\n({status}{cut})"

    # --- the tools ---------------------------------------------------------------------------

    async def view(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> str:
        """Show a file with line numbers (optionally only some lines), or list a directory
        two levels deep.

        Args:
            path: a file or directory, relative to the repository root (e.g. "pkg/mod.py").
            start_line: the first line to show (1-based); default the file's first line.
            end_line: the last line to show (inclusive; -1 for the file's end); default the end.
        """
        arguments = {"path": path, "start": start_line, "end": end_line, "limit": self.max_output}
        return await self._script(VIEW, arguments)

    async def search(self, pattern: str, path: str = ".", regex: bool = False) -> str:
        """Search file contents for a string (grep -rn); shows each matching line with its
        file and line number.

        Args:
            pattern: the text to find (a literal string unless regex is true).
            path: the file or directory to search, relative to the repository root.
            regex: treat pattern as an extended regular expression (grep -E).
        """
        _check_path(path)
        if len(pattern) > MAX_ARGUMENT:
            raise ToolCallFailed(f"the pattern is {len(pattern)} characters; keep it short")
        mode = "-E" if regex else "-F"
        argv = ["bash", "-c", _SEARCH, "search", mode, pattern, path, str(MAX_MATCHES + 1)]
        run = await self._run(argv)
        if run.timed_out:
            raise ToolCallFailed(f"the search timed out after {self.command_timeout:g} s")
        if run.exit_code == 1:
            return f"No matches for {clip(pattern, 200)!r} in {clip(path, 200)}."
        if run.exit_code not in (0, 141):  # 141: head had enough and closed the pipe
            raise ToolCallFailed(clip(run.stderr.strip() or f"grep exit code {run.exit_code}"))
        lines = [clip(line.removeprefix("./"), 300) for line in run.stdout.splitlines()]
        more = len(lines) > MAX_MATCHES
        text = excerpt("\n".join(lines[:MAX_MATCHES]), self.max_output, tail=0.0)
        return text + (f"\n(more than {MAX_MATCHES} matches; narrow the search)" if more else "")

    async def edit(self, path: str, old_str: str, new_str: str) -> str:
        """Replace the one occurrence of old_str in a file with new_str (an exact match,
        whitespace included).

        Args:
            path: the file, relative to the repository root.
            old_str: the exact text to replace; it must occur exactly once in the file.
            new_str: the text to put in its place (may be empty to delete).
        """
        if not old_str:
            raise ToolCallFailed("old_str is empty; to write a whole file use create")
        return await self._script(EDIT, {"path": path, "old_str": old_str, "new_str": new_str})

    async def create(self, path: str, content: str, overwrite: bool = False) -> str:
        """Create a new file with the given content (parent directories are made as needed).

        Args:
            path: the new file, relative to the repository root.
            content: the file's full text.
            overwrite: replace the file if it exists (otherwise an existing file is an error).
        """
        arguments = {"path": path, "content": content, "overwrite": overwrite}
        return await self._script(CREATE, arguments)

    async def bash(self, command: str) -> str:
        """Run a bash command in the repository root and show its output and exit code.
        Each call starts a fresh shell there (cd and variables do not carry over); there is
        no network; a command still running at the timeout is killed.

        Args:
            command: the command line, e.g. "git diff" or "python3 -c 'import pkg'".
        """
        if len(command) > MAX_ARGUMENT:
            raise ToolCallFailed(
                f"the command is {len(command)} characters, over {MAX_ARGUMENT}: write a script "
                "with create, then run it"
            )
        run = await self._run(["bash", "-c", command])
        return self._result(run, self.command_timeout)

    async def run_tests(self, tests: list[str] | None = None) -> str:
        """Run pytest (python3 -m pytest) in the repository root and show its report.

        Args:
            tests: test files or node ids (e.g. ["tests/test_x.py::test_y"]), or pytest
                options; empty or absent runs the whole suite.
        """
        argv = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir=."]
        run = await self._run([*argv, *(tests or [])], timeout=self.test_timeout)
        return self._result(run, self.test_timeout, tail=0.8)

    async def submit(self) -> str:
        """Submit the changes in the repository for grading; this ends the episode."""
        async with self._lock:
            if self.submitted:
                raise ToolCallFailed("already submitted")
            self.submitted = True
        return "Submitted."
