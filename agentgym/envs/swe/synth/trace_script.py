"""The traced clean run of a suite, inside the sandbox: ``python3 -I <this file> OUT FILE...``.

Only ``agentgym.envs.swe.synth.select`` touches this module on the host: it ships the source
into the sandbox. It needs the standard library and pytest, and runs on the sandbox's Python.

pytest runs the test files with a profile function (``sys.setprofile``) that notes the code
object of every Python function a frame starts to run. Each is put under the test file whose
test was running (its setup, call and teardown), or under ``""`` when no test was: collection
and imports, session- or package-scoped fixtures (whose values later tests of any file share),
and every thread the tests start (``threading.setprofile``: a thread can outlive its test). OUT gets
``{"files": {test file: ["path:first line:name", ...]}, "complete": bool}`` for the functions of
files under the repository; ``complete`` is false when a test replaced the profile function
(calls after it went unseen).
"""

from __future__ import annotations

import json
import os
import sys
import threading

import pytest

OUTSIDE = ""


class Tracer:
    """The profile function and the pytest plugin that says whose calls it sees."""

    def __init__(self) -> None:
        self.calls: dict[str, set[object]] = {OUTSIDE: set()}
        self.current = self.calls[OUTSIDE]
        self.complete = True

    def profile(self, frame: object, event: str, arg: object) -> None:
        if event == "call":
            self.current.add(frame.f_code)  # type: ignore[attr-defined]

    def profile_thread(self, frame: object, event: str, arg: object) -> None:
        # A thread may outlive its test, or run while another file's test does: its calls
        # belong to no one test file.
        if event == "call":
            self.calls[OUTSIDE].add(frame.f_code)  # type: ignore[attr-defined]

    def start(self) -> None:
        threading.setprofile(self.profile_thread)
        sys.setprofile(self.profile)

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self.current = self.calls.setdefault(nodeid.split("::", 1)[0], set())

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        if sys.getprofile() != self.profile:  # a bound method: equal, not identical
            self.complete = False
        self.current = self.calls[OUTSIDE]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: object, request: object) -> object:
        shared = getattr(fixturedef, "scope", "function") in ("session", "package")
        saved = self.current
        if shared:
            self.current = self.calls[OUTSIDE]
        yield
        self.current = saved

    def report(self, root: str) -> dict[str, object]:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        prefix = root.rstrip("/") + "/"
        files: dict[str, list[str]] = {}
        for test_file, codes in self.calls.items():
            found = set()
            for code in codes:
                path = getattr(code, "co_filename", "")
                if path.startswith(prefix):
                    line, name = code.co_firstlineno, code.co_name  # type: ignore[attr-defined]
                    found.add(f"{path[len(prefix) :]}:{line}:{name}")
            files[test_file] = sorted(found)
        return {"files": files, "complete": self.complete}


def main() -> None:
    out, files = sys.argv[1], sys.argv[2:]
    root = os.getcwd()
    here = os.path.dirname(os.path.realpath(__file__))
    # As the graded runner has it: the working directory first, then the interpreter's path.
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [root, *extra, *(p for p in sys.path if p and not p.startswith(here))]
    sys.dont_write_bytecode = True
    tracer = Tracer()
    tracer.start()
    args = ["-p", "no:cacheprovider", "--rootdir", root, "-q", "--tb=no", *files]
    code = pytest.main(args, plugins=[tracer])
    result = {**tracer.report(os.path.realpath(root)), "exit_code": int(code)}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
