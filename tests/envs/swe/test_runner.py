"""The graded run's pieces, on the host: the canary, the verdict, the test process's messages,
the file and machinery checks. (Grading itself, in sandboxes: test_forging.py.)"""

from __future__ import annotations

import ast
import json
import os
import sys
import types
from pathlib import Path

import pytest

from agentgym.envs.swe.runner import (
    Canary,
    canary_problems,
    make_canary,
    read_verdict,
    request,
)
from agentgym.envs.swe.runner_guard import (
    Guard,
    Origins,
    file_problems,
    file_states,
    report_problems,
)
from agentgym.envs.swe.runner_script import Output, read_message

TOKEN = "ab" * 16


def test_the_canary_lies_next_to_the_first_test_file_and_always_fails() -> None:
    canary = make_canary(("tests/unit/test_a.py", "tests/test_b.py"))
    assert canary.path.startswith("tests/unit/test_")
    assert canary.path.endswith(".py")
    assert [i.split("::")[0] for i in canary.ids] == [canary.path, canary.path]
    space: dict[str, object] = {}
    exec(compile(canary.source, canary.path, "exec"), space)
    klass, method = canary.ids[0].split("::")[1:]
    function = canary.ids[1].split("::")[1]
    case = space[klass](method)  # type: ignore[operator]
    with pytest.raises(AssertionError):
        getattr(case, method)()
    with pytest.raises(AssertionError):
        space[function]()  # type: ignore[operator]
    assert make_canary(()).path.count("/") == 0  # no test file: the repository root
    assert len({make_canary(("t/test_x.py",)).path for _ in range(20)}) > 10  # random names


def test_the_request_carries_the_nonce_on_its_own_line() -> None:
    canary = Canary("tests/test_c.py", "x = 1\n", ("tests/test_c.py::test_c",))
    lines = {"a.py": [3, 4]}
    text = request(
        TOKEN, ["tests/test_a.py"], ["tests/test_a.py::t"], canary, ["a.py"], 5.0, lines=lines
    )
    nonce, body = text.split("\n", 1)
    assert nonce == TOKEN
    assert json.loads(body) == {
        "lines": {"a.py": [3, 4]},
        "files": ["tests/test_a.py"],
        "tests": ["tests/test_a.py::t", "tests/test_c.py::test_c"],
        "canary": {"path": "tests/test_c.py", "source": "x = 1\n"},
        "changed": ["a.py"],
        "timeout": 5.0,
    }


def test_a_verdict_counts_only_as_one_line_with_the_nonce() -> None:
    good = json.dumps({"nonce": TOKEN, "records": []})
    assert read_verdict(good + "\n", TOKEN) == {"nonce": TOKEN, "records": []}
    assert read_verdict(good, "cd" * 16) is None
    assert read_verdict(f"{good}\n{good}\n", TOKEN) is None
    assert read_verdict("not json", TOKEN) is None
    assert read_verdict("", TOKEN) is None
    assert read_verdict("[1, 2]", TOKEN) is None


CANARY = Canary("t/test_c.py", "", ("t/test_c.py::TestC::test_x", "t/test_c.py::test_y"))


@pytest.mark.parametrize(
    ("outcomes", "all_passed", "forged"),
    [
        ({"t/test_c.py::TestC::test_x": "failed", "t/test_c.py::test_y": "failed"}, True, False),
        ({"t/test_c.py::test_y": "error"}, True, False),  # the unittest one not collected
        ({"t/test_c.py::test_y": "passed"}, False, True),
        ({"t/test_c.py::TestC::test_x": "xpass"}, False, True),
        ({}, True, True),  # every real test passed, no canary reported
        ({}, False, False),  # the run broke: nothing to judge by
        ({"t/test_c.py::test_y": "skipped"}, True, True),
        ({"t/test_c.py::test_y": "skipped"}, False, False),
    ],
)
def test_canary_problems(outcomes: dict[str, str], all_passed: bool, forged: bool) -> None:
    assert bool(canary_problems(CANARY, outcomes, all_passed)) == forged


def lines(*items: object, token: str = TOKEN, end: object = 0) -> bytes:
    body = [f"{token} {json.dumps(item)}" for item in items]
    if end is not None:
        body.append(f"{token} {json.dumps({'end': end})}")
    return ("\n".join([TOKEN, *body]) + "\n").encode()


RECORD = ["t.py::test_a", "call", "passed", False]


def test_read_message_takes_records_problems_and_the_end() -> None:
    message = lines(RECORD, {"problem": "p1"}, ["t.py::test_b", "call", "failed", False], end=1)
    records, problems, end = read_message(message, 0)
    assert records == [RECORD, ["t.py::test_b", "call", "failed", False]]
    assert (problems, end) == (["p1"], 1)


@pytest.mark.parametrize(
    "message",
    [
        lines(RECORD, token="cd" * 16),  # another token than the first line's
        lines(RECORD, RECORD),  # a record sent twice
        lines(RECORD) + f"{TOKEN} {json.dumps(RECORD)}\n".encode(),  # after the end
        lines(["t.py::test_a", "call", 1, False]),  # not a record
        lines(RECORD).replace(b"\n", b"\nnoise\n", 1),
        lines(RECORD)[:-3],  # a partial last line, and exit code 0
    ],
    ids=["token", "twice", "after-end", "types", "noise", "partial"],
)
def test_read_message_refuses_forged_messages(message: bytes) -> None:
    records, problems, end = read_message(message, 0)
    assert any("forged" in p for p in problems), problems
    assert end is None or records == [RECORD]


def test_read_message_tells_an_early_exit_from_a_crash_or_a_timeout() -> None:
    cut_short = lines(RECORD, end=None)
    assert read_message(cut_short, 0) == (
        [RECORD],
        ["the test process exited before the runner reported"],
        None,
    )
    assert read_message(cut_short, 70) == ([RECORD], [], None)  # the runner itself failed
    assert read_message(cut_short, -9) == ([RECORD], [], None)  # killed (memory)
    assert read_message(cut_short, None) == ([RECORD], [], None)  # killed at the deadline
    assert read_message(b"", 0) == ([], [], None)


def test_file_problems_name_code_config_and_test_files_only(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / ".git").mkdir()
    for name in ("tests/test_a.py", "tests/data.txt", "setup.cfg", "out.log", ".git/index"):
        (tmp_path / name).write_text("x")
    before = file_states(str(tmp_path))
    assert ".git/index" not in before
    for name in ("tests/test_a.py", "tests/data.txt", "out.log", ".git/index"):
        (tmp_path / name).write_text("changed")
    (tmp_path / "tests" / "conftest.py").write_text("x")
    (tmp_path / "setup.cfg").unlink()
    os.makedirs(tmp_path / "pkg" / "__pycache__")
    (tmp_path / "pkg" / "__pycache__" / "m.pyc").write_bytes(b"x")
    found = file_problems(before, file_states(str(tmp_path)), {"tests/data.txt"})
    assert found == [
        "the tests' processes created pkg/__pycache__/m.pyc",
        "the tests' processes removed setup.cfg",
        "the tests' processes created tests/conftest.py",
        "the tests' processes changed tests/data.txt",
        "the tests' processes changed tests/test_a.py",
    ]


def test_output_keeps_the_start_and_the_end() -> None:
    output = Output()
    for _ in range(100):
        output.add(b"x" * 1000)
    output.add(b"THE END")
    text = output.text()
    assert text.startswith("x" * 4096)
    assert text.endswith("THE END")
    assert "bytes cut" in text
    assert len(text) < 4096 + 16384 + 100


# -- runner_guard -------------------------------------------------------------------------


def _function(root: Path, relpath: str, source: str, name: str) -> object:
    """``name`` from ``source`` compiled as if it were the file ``root/relpath``."""
    space: dict[str, object] = {}
    exec(compile(source, str(root / relpath), "exec"), space)
    return space[name]


@pytest.fixture
def machinery(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module watched at every report (as the runner's own ``runner_guard`` is), holding a
    stand-in for pytest's ``TestReport``."""
    module = types.ModuleType("runner_guard")
    source = "class TestReport:\n    def from_item(self):\n        return 'failed'\n"
    exec(compile(source, "/usr/lib/python3/dist-packages/_pytest/reports.py", "exec"), vars(module))
    module.TestReport.__module__ = "runner_guard"
    monkeypatch.setitem(sys.modules, "runner_guard", module)
    return module


def test_guard_reports_what_untrusted_code_changed(
    machinery: types.ModuleType, tmp_path: Path
) -> None:
    guard = Guard.take(["runner_guard"])
    origins = Origins(str(tmp_path), {"calc/old.py": ()}, ["calc/ops.py"], [])
    assert guard.check(origins, hot_only=True) == []
    forged = _function(tmp_path, "calc/ops.py", "def f(self):\n    return 'passed'\n", "f")
    machinery.TestReport.from_item = forged
    machinery.TestReport.outcome = property(forged)  # type: ignore[arg-type]
    found = guard.check(origins, hot_only=True)
    assert any(
        "TestReport.from_item was changed during the tests: it comes from calc/ops.py" in p
        for p in found
    ), found
    assert any("TestReport.outcome was added" in p for p in found), found


def test_guard_accepts_changes_by_trusted_code_and_sees_swapped_code(
    machinery: types.ModuleType, tmp_path: Path
) -> None:
    guard = Guard.take(["runner_guard"])
    origins = Origins(str(tmp_path), {"calc/old.py": ()}, ["calc/ops.py"], [])
    old = _function(tmp_path, "calc/old.py", "def f(self):\n    return 1\n", "f")
    machinery.TestReport.from_item = old  # an unchanged file of the repository: trusted
    assert guard.check(origins) == []
    guard = Guard.take(["runner_guard"])
    new = _function(tmp_path, "calc/new.py", "def g(self):\n    return 2\n", "g")
    old.__code__ = new.__code__  # type: ignore[attr-defined]
    assert guard.check(origins) == [
        "runner_guard.TestReport.from_item was changed during the tests: it had its code swapped"
    ]
    sys.modules["runner_guard"] = types.ModuleType("runner_guard")
    assert "sys.modules['runner_guard'] was replaced during the tests" in guard.check(origins)


@pytest.mark.parametrize(
    ("filename", "trusted"),
    [
        ("/usr/lib/python3/dist-packages/_pytest/runner.py", True),
        ("calc/old.py", True),
        ("calc/ops.py", False),  # changed by the graded diff
        ("calc/new.py", False),  # appeared during the tests
        ("<string>", False),
        ("/tmp/planted.py", False),
    ],
)
def test_origins(tmp_path: Path, filename: str, trusted: bool) -> None:
    origins = Origins(str(tmp_path), {"calc/old.py": ()}, ["calc/ops.py"], [])
    path = filename if filename.startswith(("/", "<")) else str(tmp_path / filename)
    assert (origins.problem(path) is None) == trusted


def test_report_problems() -> None:
    class TestReport:
        def __init__(self, outcome: str, longrepr: object) -> None:
            self.nodeid, self.when, self.outcome, self.longrepr = "t::a", "call", outcome, longrepr

    class Fake(TestReport):
        pass

    assert report_problems(TestReport("passed", None), TestReport) == []
    assert report_problems(TestReport("failed", "E assert"), TestReport) == []
    assert report_problems(TestReport("skipped", ("f", 1, "why")), TestReport) == []
    assert report_problems(TestReport("passed", "E assert 1 == 2"), TestReport)
    assert report_problems(TestReport("ok", None), TestReport)
    assert report_problems(Fake("passed", None), TestReport)


def test_the_runner_script_runs_on_python_3_8() -> None:
    for name in ("runner_script.py", "runner_guard.py"):
        path = Path(__file__).parents[3] / "agentgym" / "envs" / "swe" / name
        ast.parse(path.read_text(), feature_version=(3, 8))
