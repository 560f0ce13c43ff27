"""Which test files a candidate needs (``synth.select``): the files whose tests ran the mutated
function on the clean code, or the whole suite (``None``) where that does not settle it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git

from agentgym.core.aio import run_sync
from agentgym.envs.swe.backends.local import LocalSWEBackend
from agentgym.envs.swe.instances import SWEInstance
from agentgym.envs.swe.synth import mutations
from agentgym.envs.swe.synth.mutate import Mutation
from agentgym.envs.swe.synth.select import Trace, function_of, trace_suite

SOURCE = """import functools

TABLE = [1, 2, 3]


def plain(x, limit=3):
    return x + 1 if x < limit else x


@functools.lru_cache(maxsize=None)
def cached(n):
    return n * 2


def outer(items):
    def inner(item, scale=2):
        return item * scale

    return [inner(i) for i in items]


class Box:
    @property
    def size(self):
        return len(self.items) - 0


def at_import():
    return 10 + 1


VALUE = at_import()
"""
TRACE = Trace(
    {
        "": ["pkg/m.py:1:<module>", "pkg/m.py:28:at_import"],
        "tests/test_a.py": ["pkg/m.py:6:plain", "pkg/m.py:15:outer", "pkg/m.py:16:inner"],
        # Python 3.8+ starts a decorated function's code at its first decorator.
        "tests/test_b.py": ["pkg/m.py:10:cached", "pkg/m.py:6:plain"],
        "tests/test_c.py": ["pkg/m.py:15:outer"],
    }
)


def edit(function: str, kind: str) -> Mutation:
    found = [m for m in mutations("pkg/m.py", SOURCE) if (m.function, m.kind) == (function, kind)]
    assert found, (function, kind, {(m.function, m.kind) for m in mutations("pkg/m.py", SOURCE)})
    return found[0]


@pytest.mark.parametrize(
    ("function", "kind", "files"),
    [
        ("plain", "compare_op", ["tests/test_a.py", "tests/test_b.py"]),
        ("cached", "arith_op", ["tests/test_b.py"]),
        # the inner function's body: only where inner ran, not everywhere outer did
        ("outer.inner", "arith_op", ["tests/test_a.py"]),
        ("Box.size", "arith_op", []),  # no test ran it: none can fail
        ("plain", "change_default", None),  # a default is evaluated at import
        (
            "outer.inner",
            "change_default",
            ["tests/test_a.py", "tests/test_c.py"],
        ),  # in outer's body
        ("at_import", "arith_op", None),  # run outside any test
    ],
)
def test_a_candidate_needs_the_files_that_ran_its_function(
    function: str, kind: str, files: list[str] | None
) -> None:
    assert TRACE.files_for([edit(function, kind)], {"pkg/m.py": SOURCE}) == files


def test_an_edit_outside_every_function_body_runs_the_whole_suite() -> None:
    start = SOURCE.index("[1, 2, 3]")
    module_level = Mutation("change_constant", "pkg/m.py", "-", 3, start + 1, start + 2, "1", "2")
    assert function_of(SOURCE, module_level) is None
    assert TRACE.files_for([module_level], {"pkg/m.py": SOURCE}) is None
    # two functions of one file: the files of either
    pair = [edit("cached", "arith_op"), edit("outer.inner", "arith_op")]
    assert TRACE.files_for(pair, {"pkg/m.py": SOURCE}) == ["tests/test_a.py", "tests/test_b.py"]


TRACED = {
    "pkg/__init__.py": "",
    "pkg/m.py": "def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x * 2\n\n\n"
    "def h(x):\n    return x - 1\n\n\nTABLE = [h(1)]\n",
    "tests/test_direct.py": "from pkg.m import f\n\n\ndef test_f():\n    assert f(1) == 2\n",
    "tests/test_thread.py": "import threading\n\nfrom pkg.m import f, g\n\n\n"
    "def test_g():\n    out = []\n    t = threading.Thread(target=lambda: out.append(g(2)))\n"
    "    t.start()\n    t.join()\n    assert out == [4] and f(0) == 1\n",
}


@pytest.mark.usefixtures("local_only")
def test_the_traced_run_puts_threads_and_imports_outside_every_file(tmp_path: Path) -> None:
    # A thread can outlive its test or run beside another file's: its calls select no file.
    repo = tmp_path / "r"
    for name, text in TRACED.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "x")
    tests = ["tests/test_direct.py::test_f", "tests/test_thread.py::test_g"]
    trace = run_sync(_trace(repo, tests))
    assert trace is not None
    source = TRACED["pkg/m.py"]
    found = {m.function: m for m in mutations("pkg/m.py", source) if m.kind == "arith_op"}
    files = {name: trace.files_for([m], {"pkg/m.py": source}) for name, m in found.items()}
    assert files == {
        "f": ["tests/test_direct.py", "tests/test_thread.py"],
        "g": None,  # called in a thread
        "h": None,  # called at import
    }


async def _trace(repo: Path, tests: list[str]) -> Trace | None:
    commit = git(repo, "rev-parse", "HEAD").strip()
    instance = SWEInstance(
        instance_id="traced", repo="r", repo_path=repo, base_commit=commit,
        problem_statement="-", test_patch="", patch=None, fail_to_pass=("-",), pass_to_pass=(),
    )  # fmt: skip
    backend = LocalSWEBackend()
    try:
        sandbox = await backend.acquire(instance)
        return await trace_suite(sandbox, tests, 60)
    finally:
        await backend.aclose()
