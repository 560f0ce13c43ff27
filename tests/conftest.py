"""Suite-wide collection rule: the acceptance studies (``@pytest.mark.study``, an hour or more of
training each) run only when asked for by name (``pytest -m study``, ``make curriculum-study``);
any other selection, ``-m "not slow"`` included, leaves them out. A fast sample marked
``@pytest.mark.covered_by("<node id>")`` is left out when that slow test, which repeats its checks
on a superset, runs in the same session (CI runs both otherwise). And ``user_envs``: a module of
the user's own that registers an env, for the commands' ``module:Env-v0`` and ``--import``.

Runs side by side share the suite (scripts/run_tests.sh): with ``AGENTGYM_TEST_CLAIMS`` naming a
folder they share, a run takes a test module when it reaches the module's first test, by creating
a file for it there; a module another run took is left to that run, its tests reported
"elsewhere" (neither run nor skipped here). ``AGENTGYM_TEST_ORDER=reverse`` walks the modules from
the last, so that a run started late meets the others in the middle; once the file
``AGENTGYM_TEST_UNTIL`` names exists, the run takes no new module."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, settings

# Property tests judge what is generated, never how fast: the per-example deadline and the "input
# generation is slow" health checks failed tests of correct code under CI's load (test runs side by
# side at a lower priority). A test's own @settings still wins for what it names.
settings.register_profile(
    "agentgym",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("agentgym")

USER_MODULE = """import gymnasium

gymnasium.register(
    {env_id!r},
    entry_point="agentgym.envs.frozenlake.env:FrozenLakeEnv",
    kwargs={{"size": 2, "hole_prob": 0.0}},
)
"""


@pytest.fixture
def user_envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """``(module, env id)``: a module in the working directory (not imported yet) whose import
    registers the id, a 2x2 FrozenLake without holes, as a user's script would."""
    tag = uuid.uuid4().hex[:8]
    module, env_id = f"user_envs_{tag}", f"userorg/Lake{tag}-v0"
    (tmp_path / f"{module}.py").write_text(USER_MODULE.format(env_id=env_id))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the commands add the working directory
    yield module, env_id
    sys.modules.pop(module, None)
    gym.registry.pop(env_id, None)


ELSEWHERE = "taken by another test run (AGENTGYM_TEST_CLAIMS)"


class Claims:
    """Which modules this run takes; each is decided once, when its first test comes."""

    def __init__(self, folder: str, until: str | None) -> None:
        self.folder = Path(folder)
        self.until = Path(until) if until else None
        self.taken: dict[str, bool] = {}

    def mine(self, module: str) -> bool:
        if module not in self.taken:
            self.taken[module] = not (self.until and self.until.exists()) and self._claim(module)
        return self.taken[module]

    def _claim(self, module: str) -> bool:
        path = self.folder / hashlib.sha1(module.encode()).hexdigest()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()} {module}\n")
        return True


_claims = (
    Claims(os.environ["AGENTGYM_TEST_CLAIMS"], os.environ.get("AGENTGYM_TEST_UNTIL"))
    if os.environ.get("AGENTGYM_TEST_CLAIMS")
    else None
)


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: a module left to another run costs nothing here.
    if _claims is not None and not _claims.mine(_module(item)):
        pytest.skip(ELSEWHERE)


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, str] | None:
    if report.when == "setup" and report.skipped and ELSEWHERE in str(report.longrepr):
        return "elsewhere", "", "ELSEWHERE"
    return None


def _covered(item: pytest.Item, collected: set[str]) -> bool:
    marker = item.get_closest_marker("covered_by")
    return marker is not None and marker.args[0] in collected


# trylast: after -m and -k have deselected theirs, so that a sample whose slow test -m "not slow"
# left out still runs.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    collected = {item.nodeid for item in items}
    study = "study" in (config.getoption("markexpr") or "")
    dropped = [
        item
        for item in items
        if (item.get_closest_marker("study") and not study) or _covered(item, collected)
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        ids = {item.nodeid for item in dropped}
        items[:] = [item for item in items if item.nodeid not in ids]
    if os.environ.get("AGENTGYM_TEST_ORDER") == "reverse":
        modules: dict[str, list[pytest.Item]] = {}
        for item in items:
            modules.setdefault(_module(item), []).append(item)
        items[:] = [item for module in reversed(modules) for item in modules[module]]


def _cgroup_cpu_file() -> Path | None:
    """cgroup v1's cpuacct.usage (ns) of this process's cgroup, which counts the CPU time of every
    process it started, reaped or not, daemons included; None where there is none."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, group = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            path = Path("/sys/fs/cgroup/cpuacct", group.lstrip("/"), "cpuacct.usage")
            return path if path.is_file() else None
    return None


def _cpu_seconds(path: Path) -> float:
    return int(path.read_text()) / 1e9


_cpu_log = os.environ.get("AGENTGYM_TEST_CPU")
_cpu_file = _cgroup_cpu_file() if _cpu_log else None


# A single-process DeepSpeed backend sets torch's env:// rendezvous variables (its store keeps
# listening on MASTER_PORT while the process group lives): a subprocess that a later module
# starts would inherit them and try to listen on that port too (EADDRINUSE). Each module's tests
# and fixtures keep what they set; the next module starts from the session's values.
_RENDEZVOUS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_rendezvous_at_start = {key: os.environ.get(key) for key in _RENDEZVOUS}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    if nextitem is None or _module(nextitem) != _module(item):  # its module's fixtures are gone
        for key, value in _rendezvous_at_start.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# Where the CPU goes (scripts/run_tests.sh, as root, gives each run a cgroup of its own, and a run
# runs one test at a time): with AGENTGYM_TEST_CPU naming a file, each test's wall time and the CPU
# time its cgroup spent meanwhile (its fixtures, subprocesses, servers and browsers; not a docker
# container's, which dockerd keeps in a cgroup of its own) as JSON lines.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if _cpu_file is None:
        yield
        return
    wall, cpu = time.monotonic(), _cpu_seconds(_cpu_file)
    yield
    if _claims is not None and not _claims.taken.get(_module(item), True):
        return  # another run's module ("elsewhere")
    record = {
        "test": item.nodeid,
        "wall_s": round(time.monotonic() - wall, 2),
        "cpu_s": round(_cpu_seconds(_cpu_file) - cpu, 2),
    }
    with open(_cpu_log, "a") as f:  # type: ignore[arg-type]  # set when _cpu_file is
        f.write(json.dumps(record) + "\n")
