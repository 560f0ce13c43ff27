"""The script that runs the graded tests inside the grading sandbox (``python3 runner.py``).

It reads ``{"nonce", "files", "report"}`` from stdin (so the nonce is in no file, argument or
environment variable), imports pytest while only the system's folders are on ``sys.path``, then
puts the repository first on ``sys.path`` as ``python -m pytest`` does, runs pytest on
``files`` with a plugin that records every test report, writes the nonce and the records to
``report`` and leaves at once with ``os._exit``. Records are ``[nodeid, when, outcome, xfail]``.
"""

RUNNER = r"""
import json, os, sys
_open, _write, _close, _exit, _dumps = os.open, os.write, os.close, os._exit, json.dumps
_request = json.loads(sys.stdin.read())
sys.stdin.close()
del sys.path[0]  # this script's folder
import pytest
sys.path.insert(0, os.getcwd())


class _Recorder:
    def __init__(self):
        self.records = []

    def pytest_runtest_logreport(self, report):
        xfail = hasattr(report, "wasxfail")
        self.records.append([report.nodeid, report.when, report.outcome, xfail])

    def pytest_collectreport(self, report):
        if report.failed:
            self.records.append([report.nodeid, "collect", "failed", False])


_recorder = _Recorder()
_args = ["-p", "no:cacheprovider", "--rootdir", os.getcwd(), "-rfE", "--tb=short"]
try:
    _code = int(pytest.main(_args + _request["files"], plugins=[_recorder]))
except BaseException as _error:
    _code = -1
    print("pytest raised %r" % (_error,), file=sys.stderr)
sys.stdout.flush()
sys.stderr.flush()
_data = _dumps({"nonce": _request["nonce"], "exit_code": _code, "records": _recorder.records})
_fd = _open(_request["report"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
_view = memoryview(_data.encode())
while _view:
    _view = _view[_write(_fd, _view):]
_close(_fd)
_exit(0)
"""
