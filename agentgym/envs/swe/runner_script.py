"""The graded test run, inside the grading sandbox: ``python3 -I <this file>`` in the repository.

Only ``agentgym.envs.swe.runner`` touches this module on the host: it ships the source into
the sandbox (and tests import its pieces). It needs the standard library and pytest only, and
runs on the sandbox's Python (3.8 or later). Why it is built this way: the grader's docstring.

Two processes:

- the supervisor (the script's own process) reads a nonce and a request from stdin, imports
  pytest and its plugins while no folder of the repository is on ``sys.path``, makes itself
  non-dumpable (no process of its user can then read its memory or open its descriptors through
  ``/proc``), writes the grader's canary test file, makes pytest rewrite the test modules'
  comparisons (``runner_compare``), records the test machinery (``Guard``) and the
  repository's files, and forks
- the test process, which zeroes its copy of the nonce, sends a random token of its own to the
  supervisor before any code of the repository runs, puts the repository first on ``sys.path``
  and runs pytest on the requested files (the canary last) with ``Recorder``, which checks
  each report and its test function (and, at a call report, the reporting hooks and machinery:
  ``runner_guard``; before each test, the test modules' names: ``runner_guard.Bindings``),
  then sends the report's record at once, as a ``<token> <json>`` line on a
  pipe of its own; problems found go the same way, and ``<token> {"end": pytest's exit code}``
  last, before it leaves with ``os._exit``.
  Its stdout and stderr go to the supervisor, who keeps their start and end.

The supervisor waits for the test process (or the deadline), kills its process group, reads its
lines (``read_message``: a line without the token, a record sent twice or anything after the
end means forged; exiting 0 without the end means it was cut short on purpose), compares the
repository's code, configuration and test files with their state before the run, and prints ONE
line on stdout, which no other process holds: ``{"nonce", "records", "problems", "exit_code",
"timed_out", "error"}``. The tests' output goes to its stderr.

Request on stdin: the 32-character hex nonce and a newline, then JSON ``{"files": [...],
"tests": [...], "canary": {"path", "source"}, "changed": [...], "lines": {path: [added line
numbers]}, "timeout": seconds}``. The
verdict keeps the records of ``tests`` only, as ``[nodeid, when, outcome, xfail]``; problems
are sentences naming what looked tampered with.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

if __name__ == "__main__":  # in the sandbox: runner_guard.py lies next to this file
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
    import runner_compare as compare
    import runner_guard as checks

    del sys.path[0]
else:  # imported on the host (tests)
    from agentgym.envs.swe import runner_compare as compare
    from agentgym.envs.swe import runner_guard as checks

_dumps, _loads = json.dumps, json.loads
_exit, _write, _read = os._exit, os.write, os.read
NONCE_LEN = 32
OUTPUT_HEAD, OUTPUT_TAIL = 4096, 16384
MAX_PROBLEMS = 50


# -- reading the request ------------------------------------------------------------------


def read_nonce(fd: int = 0) -> bytearray:
    """The nonce line, read straight into a bytearray (no copy the test process could find)."""
    buf = bytearray(NONCE_LEN + 1)
    view = memoryview(buf)
    got = 0
    while got < len(buf):
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise SystemExit("runner: stdin ended before the nonce")
        got += n
    view.release()
    return buf


def read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = _read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


# -- the test process ---------------------------------------------------------------------


class Recorder:
    """The pytest plugin of the test process: checks each test report and its test function,
    and at a test's call report the reporting hooks and the reporting path's machinery
    (``runner_guard``), then sends the report's record, and any problem found, to the
    supervisor at once (nothing piles up in memory where later code could rewrite it)."""

    def __init__(self, send: Callable[[object], None], guard: checks.Guard,
                 origins: checks.Origins, report_class: type,
                 plain: compare.Plain | None = None,
                 files: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.send, self.guard, self.origins = send, guard, origins
        self.report_class, self.plain = report_class, plain
        self.files = frozenset(os.path.realpath(f) for f in files)
        self.sent: set[str] = set()
        self.hooks: checks.Hooks | None = None
        self.tests: dict[str, tuple[object, str, object, object]] = {}
        self.bindings = checks.Bindings()

    def pytest_configure(self, config: object) -> None:
        self.hooks = checks.Hooks(config.pluginmanager, self.origins)  # type: ignore[attr-defined]

    def pytest_collection_finish(self, session: object) -> None:
        """Note each collected test function and its code (defined once its module ran)."""
        for item in getattr(session, "items", []):
            try:
                holder = item.parent.obj  # the module, or the class
                name = item.originalname
            except Exception:  # not a Python function's test (a doctest, a plugin's item)
                continue
            func = getattr(holder, name, None)
            code = getattr(getattr(func, "__func__", func), "__code__", None)
            if code is not None:
                self.tests[item.nodeid] = (holder, name, func, code)
        self.problems(self.note_modules(getattr(session, "items", [])))

    def note_modules(self, items: list) -> list[str]:  # type: ignore[type-arg]
        """Check that each graded test module had its comparisons rewritten
        (``runner_compare``), and note its bindings (``runner_guard.Bindings``)."""
        found = []
        for item in items:
            module = getattr(item, "module", None)
            path = os.path.realpath(str(getattr(module, "__file__", "")))
            if path not in self.files or not self.bindings.note(path, module):
                continue
            if self.plain is not None and not compare.rewritten(module, self.plain):
                found.append(f"the test module {os.path.relpath(path)} was not imported "
                             "through the grader's rewriting of its comparisons")  # fmt: skip
        return found + self.bindings.problems()

    def pytest_runtest_call(self, item: object) -> None:
        """Before each test runs: the graded test modules' names hold what they held (a
        rebound name is put back, and is tampering)."""
        self.problems(self.bindings.problems())

    def pytest_runtest_logreport(self, report: object) -> None:
        found = checks.report_problems(report, self.report_class)
        found += self.test_problems(getattr(report, "nodeid", None))
        if getattr(report, "when", None) == "call":
            found += self.guard.check(self.origins, hot_only=True)
            found += self.hooks.problems() if self.hooks is not None else []
        self.problems(found)
        rep: Any = report
        self.send([str(rep.nodeid), str(rep.when), str(rep.outcome), hasattr(rep, "wasxfail")])

    def pytest_collectreport(self, report: object) -> None:
        rep: Any = report
        if rep.failed:
            self.send([str(rep.nodeid), "collect", "failed", False])

    def test_problems(self, nodeid: object) -> list[str]:
        """Whether the test function of ``nodeid`` is still the one collected, with its code."""
        if nodeid not in self.tests:
            return []
        holder, name, func, code = self.tests[nodeid]  # type: ignore[index]
        now = getattr(holder, name, None)
        if now is func and getattr(getattr(now, "__func__", now), "__code__", None) is code:
            return []
        return [f"the test function of {nodeid} was replaced or changed after collection"]

    def problems(self, found: list[str]) -> None:
        for problem in found:
            if problem not in self.sent:
                self.sent.add(problem)
                self.send({"problem": problem})


def run_tests(send: Callable[[object], None], request: dict,  # type: ignore[type-arg]
              guard: checks.Guard, origins: checks.Origins) -> int:  # fmt: skip
    """In the test process: pytest on the requested files; its exit code."""
    import pytest

    # As `python -m pytest` would have it: the working directory, $PYTHONPATH, then the
    # interpreter's own path (an editable install's folders of the repository included).
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *extra, *request["sys_path"]]
    graded = (*request["files"], request["canary"]["path"])
    recorder = Recorder(send, guard, origins, pytest.TestReport, request.get("plain"), graded)
    args = ["-p", "no:cacheprovider", "--rootdir", os.getcwd(), "-rfE", "--tb=short",
            "--maxfail=0", "--assert=rewrite", *graded]  # fmt: skip
    try:
        code = int(pytest.main(args, plugins=[recorder]))
    except BaseException as error:
        code = -1
        print(f"pytest raised {error!r}", file=sys.stderr)
    recorder.problems(guard.check(origins))
    return code


def test_process(nonce: bytearray, request: dict, guard: checks.Guard, origins: checks.Origins,  # type: ignore[type-arg]
                 pipes: tuple[int, int, int, int]) -> None:  # fmt: skip
    """The forked child: never returns. Sends its token first, then one ``<token> <json>``
    line per record or problem, then ``<token> {"end": exit code}``."""
    msg_r, msg_w, out_r, out_w = pipes
    try:
        for i in range(len(nonce)):
            nonce[i] = 0
        os.setpgid(0, 0)
        _set_dumpable(True)  # its own /proc entries readable again; the supervisor's are not
        os.close(msg_r)
        os.close(out_r)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        token = os.urandom(16).hex()
        write_all(msg_w, (token + "\n").encode())

        def send(item: object) -> None:
            write_all(msg_w, (token + " " + _dumps(item) + "\n").encode())

        code = run_tests(send, request, guard, origins)
        sys.stdout.flush()
        sys.stderr.flush()
        send({"end": code})
    except BaseException:
        _exit(70)
    _exit(0)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[_write(fd, view) :]


# -- the supervisor -----------------------------------------------------------------------


def _set_dumpable(on: bool) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, int(on), 0, 0, 0)  # PR_SET_DUMPABLE
    except (ImportError, OSError, AttributeError):
        pass  # without ctypes: the sandbox's other defences only


class Output:
    """The start and the end of the test process's output."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = OUTPUT_HEAD - len(self.head)
        self.head += data[:room]
        self.tail += data[room:] if room > 0 else data
        if len(self.tail) > OUTPUT_TAIL:
            cut = len(self.tail) - OUTPUT_TAIL
            self.dropped += cut
            del self.tail[:cut]

    def text(self) -> str:
        middle = f"\n... ({self.dropped} bytes cut) ...\n".encode() if self.dropped else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", "replace")


def supervise(
    pid: int, msg_r: int, out_r: int, deadline: float
) -> tuple[bytes, int | None, Output]:
    """Read the test process's pipes until it exits or the deadline passes, then kill its
    process group; return what it sent, its exit code (None: killed at the deadline) and its
    output."""
    import selectors

    output, message = Output(), bytearray()
    sel = selectors.DefaultSelector()
    sel.register(msg_r, selectors.EVENT_READ, message)
    sel.register(out_r, selectors.EVENT_READ, output)
    pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ, None)
    status = None
    while status is None:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for key, _ in sel.select(min(left, 0.05) if pidfd is None else left):
            if key.data is None or not _take(key.fd, key.data):
                sel.unregister(key.fd)
        done, status = os.waitpid(pid, os.WNOHANG)
        status = status if done else None
    _kill_group(pid)
    for fd, sink in ((msg_r, message), (out_r, output)):
        os.set_blocking(fd, False)
        while _take(fd, sink):
            pass
    code = None if status is None else _exit_code(status)
    return bytes(message), code, output


def _exit_code(status: int) -> int:
    """``os.waitstatus_to_exitcode`` (Python 3.9+): the code, or minus the killing signal."""
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)


def _take(fd: int, sink: object) -> bool:
    """Read what ``fd`` holds into ``sink``; False at its end (or nothing more for now)."""
    try:
        data = _read(fd, 1 << 16)
    except BlockingIOError:
        return False
    if not data:
        return False
    if isinstance(sink, Output):
        sink.add(data)
    else:
        sink += data  # type: ignore[operator]
    return True


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):  # os.kill: in case it left its group
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


_FORGED = "the test process's messages to the runner were altered or forged"


def read_message(message: bytes, code: int | None) -> tuple[list[list[object]], list[str], object]:
    """Records, problems and pytest's exit code from what the test process sent (its exit
    code: ``code``; None when it was killed at the deadline). A line without its token, a
    record sent twice or anything after the end makes the whole of it forged."""
    hello, _, body = message.partition(b"\n")
    if not message:
        return [], [], None
    prefix = hello + b" "
    lines = body.split(b"\n")
    partial = lines.pop()  # b"" when the last line is complete
    records: list[list[object]] = []
    problems: list[str] = []
    seen: set[tuple[object, object]] = set()
    end: object = None
    ended = False
    for line in lines:
        item = _item(line, prefix) if len(hello) == 32 and not ended else None
        if isinstance(item, list) and (item[0], item[1]) not in seen:
            seen.add((item[0], item[1]))
            records.append(item)
        elif isinstance(item, dict) and "problem" in item:
            problems.append(str(item["problem"]))
        elif isinstance(item, dict) and "end" in item:
            end, ended = item["end"], True
        else:
            return [], [_FORGED], None
    if code == 0 and (partial or not ended):
        why = _FORGED if partial else "the test process exited before the runner reported"
        problems.append(why)
    return records, problems, end


def _item(line: bytes, prefix: bytes) -> object:
    """A record ``[str, str, str, bool]`` or a dict, from a ``<token> <json>`` line; else None."""
    if not line.startswith(prefix):
        return None
    try:
        item = _loads(line[len(prefix) :])
    except ValueError:
        return None
    if isinstance(item, dict):
        return item
    kinds = [type(x) for x in item] if isinstance(item, list) else []
    return item if kinds == [str, str, str, bool] else None


def main() -> None:
    nonce = read_nonce()
    request = _loads(read_all(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    root = os.getcwd()
    here = os.path.dirname(os.path.realpath(__file__))
    sys.dont_write_bytecode = True
    own_path = [p for p in sys.path if p and not _inside(p, (here,))]
    request["sys_path"] = moved(own_path, os.environ.get("AGENTGYM_IMAGE_REPO"), root)
    sys.path[:] = [p for p in sys.path if p and not _inside(p, (root, here))]
    _set_dumpable(False)
    verdict = judge(nonce, request, root)
    sys.stderr.write(verdict.pop("output", ""))
    sys.stderr.flush()
    verdict["nonce"] = bytes(nonce[:NONCE_LEN]).decode("ascii")
    sys.stdout.write(_dumps(verdict) + "\n")
    sys.stdout.flush()


def moved(paths: list[str], image_repo: str | None, root: str) -> list[str]:
    """``paths`` with each folder under ``image_repo`` (where the image keeps the repository,
    e.g. an editable install's ``/testbed/src``) moved to the same folder under ``root``, the
    copy the tests run in."""
    if not image_repo or os.path.realpath(image_repo) == os.path.realpath(root):
        return paths
    base = image_repo.rstrip("/")
    return [root + p[len(base) :] if p == base or p.startswith(base + "/") else p for p in paths]


def _inside(path: str, folders: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    return any(real == f or real.startswith(f.rstrip("/") + "/") for f in folders)


def prepare(request: dict) -> str | None:  # type: ignore[type-arg]
    """Import pytest and its plugins (before any folder of the repository is on ``sys.path``)
    and write the canary test file; an error that stops grading, or None."""
    try:
        import pytest  # noqa: F401
        from _pytest.config import default_plugins, essential_plugins
    except ImportError as e:
        return f"pytest cannot be imported in the sandbox: {e}"
    for name in (*essential_plugins, *default_plugins):
        with contextlib.suppress(ImportError):
            __import__("_pytest." + name)
    import unittest  # noqa: F401  (the canary's)

    canary = request["canary"]
    try:
        fd = os.open(canary["path"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as e:
        return f"cannot write the canary test {canary['path']}: {e}"
    write_all(fd, canary["source"].encode())
    os.close(fd)
    return None


def judge(nonce: bytearray, request: dict, root: str) -> dict:  # type: ignore[type-arg]
    """Fork the test process, wait for it, and judge what it sent and what it left."""
    error = prepare(request)
    if error is not None:
        return {"records": [], "problems": [], "exit_code": None, "timed_out": False,
                "error": error}  # fmt: skip
    before = checks.file_states(root)
    here = os.path.dirname(os.path.realpath(__file__))
    own = [os.path.realpath(__file__), *(os.path.join(here, f"runner_{name}.py")
                                         for name in ("guard", "compare"))]  # fmt: skip
    origins = checks.Origins(root, before, request["changed"], own)
    request["plain"] = compare.install(origins, request.get("lines", {}))
    guard = checks.Guard.take(checks.machinery())
    deadline = time.monotonic() + float(request["timeout"])
    msg_r, msg_w = os.pipe()
    out_r, out_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        test_process(nonce, request, guard, origins, (msg_r, msg_w, out_r, out_w))
    with contextlib.suppress(OSError):  # it already did, or is gone
        os.setpgid(pid, pid)
    os.close(msg_w)
    os.close(out_w)
    message, code, output = supervise(pid, msg_r, out_r, deadline)
    records, problems, exit_code = read_message(message, code)
    watched = {*request["files"], request["canary"]["path"]}
    problems += checks.file_problems(before, checks.file_states(root), watched)
    tests = frozenset(request["tests"])
    return {
        "records": [r for r in records if r[0] in tests],
        "problems": problems[:MAX_PROBLEMS],
        "exit_code": exit_code,
        "timed_out": code is None,
        "error": None,
        "output": output.text(),
    }


if __name__ == "__main__":
    main()
