"""Which test files can see a bug: those whose tests, on the clean code, ran the mutated function.

A bug made by ``mutate`` changes one function's body and nothing else. A test that never runs
that function runs exactly the same code with the bug as without it, so its outcome cannot
change; nor can collection or imports, unless they call the function. So a candidate needs only
the test files whose tests called it, and its ``FAIL_TO_PASS`` tests are the same as the whole
suite's. ``trace_suite`` learns, once per repository, which functions each test file's tests
call (``trace_script`` in the sandbox); ``Trace.files_for`` answers for a candidate, or says
"the whole suite" (``None``) when the argument does not hold: an edit outside a function's body
(a default value, a decorator), a function called outside any test (at import, by a session
fixture), or a trace that lost sight of calls (a test replaced the profile function).

What a trace cannot see: code run in other processes (a test that starts Python), and tests
whose outcome depends on what tests of another file left behind (order dependence across
files); both would make a selected run and the whole suite disagree, and so would a bug that
slows the suite past its timeout only when every file runs.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

from agentgym.core.errors import SandboxError, SandboxFileError
from agentgym.envs.swe.backends.base import REPO_DIR
from agentgym.envs.swe.grader import GRADER_DIR
from agentgym.envs.swe.synth.mutate import Mutation
from agentgym.sandbox import Sandbox

__all__ = ["Trace", "function_of", "trace_suite"]

TRACE_SCRIPT = "trace.py"
TRACE_SOURCE = (Path(__file__).parent / "trace_script.py").read_text()
_OUT = ".agentgym-trace.json"  # in the work dir, outside the repository
_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}
OUTSIDE = ""


@dataclass(frozen=True)
class Trace:
    """Test file -> the functions its tests ran (``"path:first line:name"``); ``""`` holds
    those run outside any test."""

    files: dict[str, list[str]]

    def files_for(self, group: list[Mutation], sources: dict[str, str]) -> list[str] | None:
        """The test files that ran every function ``group`` edits, sorted; ``None`` when the
        whole suite must run."""
        chosen: set[str] = set()
        for mutation in group:
            where = function_of(sources[mutation.path], mutation)
            if where is None:
                return None
            name, lines = where
            wanted = {f"{mutation.path}:{line}:{name}" for line in lines}
            if wanted & set(self.files.get(OUTSIDE, ())):
                return None
            chosen |= {f for f, codes in self.files.items() if f and wanted & set(codes)}
        return sorted(chosen)

    def to_dict(self) -> dict[str, list[str]]:
        return self.files


def function_of(source: str, mutation: Mutation) -> tuple[str, range] | None:
    """The name of the innermost function whose body holds ``mutation``'s edit, and the lines
    its code object may say it starts on (its first decorator's to its ``def``); ``None`` for
    an edit outside every function body."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines(keepends=True)
    starts = [0]
    for text in lines:
        starts.append(starts[-1] + len(text))

    def offset(line: int, col: int) -> int:
        text = lines[line - 1] if line - 1 < len(lines) else ""
        return starts[line - 1] + len(text.encode()[:col].decode(errors="replace"))

    found: tuple[str, range] | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.body:
            continue
        first, last = node.body[0], node.body[-1]
        body_start = offset(first.lineno, first.col_offset)
        body_end = offset(last.end_lineno or last.lineno, last.end_col_offset or 0)
        if body_start <= mutation.start and mutation.end <= body_end:
            # ast.walk goes outside in: a later match is nested in the earlier ones.
            top = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found = (node.name, range(top, node.lineno + 1))
    return found


async def trace_suite(sandbox: Sandbox, tests: list[str], timeout: float) -> Trace | None:
    """Run the files of ``tests`` once with the tracer; ``None`` when the run did not finish
    or lost sight of calls (then every candidate runs the whole suite)."""
    files = list(dict.fromkeys(test.split("::", 1)[0] for test in tests))
    await sandbox.write_file(f"{GRADER_DIR}/{TRACE_SCRIPT}", TRACE_SOURCE)
    script = f"{sandbox.workdir}/{GRADER_DIR}/{TRACE_SCRIPT}"
    out = f"{sandbox.workdir}/{_OUT}"
    run = await sandbox.run(
        ["python3", "-I", script, out, *files], timeout=timeout, cwd=REPO_DIR, env=_ENV
    )
    if run.timed_out:
        return None
    try:
        data = json.loads(await sandbox.read_file(_OUT))
    except (SandboxError, SandboxFileError, ValueError):
        return None
    if not isinstance(data, dict) or not data.get("complete"):
        return None
    files_ran = data.get("files")
    if not isinstance(files_ran, dict):
        return None
    return Trace({str(k): [str(c) for c in v] for k, v in files_ran.items()})
