"""Secure by default: which sandbox runs model-written code, and the refusal when none isolates.

The probes are stood in for (``_bwrap.why_not_bwrap``, ``selection.why_not_docker``) so that
each branch runs on machines where bubblewrap and Docker both exist; the tests at the end use
the real probes and try to escape the sandbox the default picks.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.core import run_sync
from agentgym.envs.code import CodeEnv
from agentgym.envs.swe.backends import LocalSWEBackend, make_backend
from agentgym.error import ConfigError, SandboxIsolationWarning, SandboxUnavailable
from agentgym.sandbox import LocalSandbox, _bwrap, open_sandbox, resolve_sandbox, selection

from .conftest import REQUIRED, _unavailable, arun

NO_BWRAP = "bubblewrap (bwrap) is not installed"
NO_DOCKER = "no Docker daemon answers at /var/run/docker.sock (stood in for)"
ECHO = "```python\nprint(input())\n```"


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, int]]:
    """``probes(bwrap=why_not, docker=why_not)`` sets what the two probes answer (None: works);
    returns a dict counting the docker probe's calls."""
    calls = {"docker": 0}

    def stand_in(*, bwrap: str | None, docker: str | None) -> dict[str, int]:
        def why_not_docker(image: str | None = None) -> str | None:
            calls["docker"] += 1
            return docker

        monkeypatch.setattr(_bwrap, "why_not_bwrap", lambda: bwrap)
        monkeypatch.setattr(selection, "why_not_docker", why_not_docker)
        return calls

    return stand_in


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if this process had not warned about running unisolated yet."""
    monkeypatch.setattr(selection, "_warned", False)


@pytest.fixture(scope="module")
def echo_task(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A stdio task that any program echoing its input passes."""
    path = tmp_path_factory.mktemp("tasks") / "echo.jsonl"
    task = {"task_id": "echo", "question": "Echo.", "tests": [{"input": "hi\n", "output": "hi"}]}
    path.write_text(json.dumps(task) + "\n")
    return str(path)


def _math_env(**kwargs: Any) -> Any:
    pytest.importorskip("math_verify")
    from agentgym.envs.math import MathEnv

    return MathEnv(size=3, **kwargs)


def _host_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentgym.envs.swe.backends import local

    monkeypatch.setattr(local, "host_problem", lambda: None)  # git and pytest: not tested here


# --- each branch, the probes stood in for ----------------------------------------------------


def test_auto_takes_bubblewrap_where_it_runs_without_asking_docker(
    probes: Callable[..., dict[str, int]], echo_task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = probes(bwrap=None, docker=NO_DOCKER)
    _host_ok(monkeypatch)
    assert resolve_sandbox("auto") == "local"
    assert CodeEnv(tasks=echo_task).backend == "local"
    assert _math_env(python_tool=True).backend == "local"
    assert make_backend("auto").name == "local"
    assert calls["docker"] == 0


def test_auto_takes_docker_where_bubblewrap_is_missing(
    probes: Callable[..., dict[str, int]], echo_task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("docker")
    probes(bwrap=NO_BWRAP, docker=None)
    _host_ok(monkeypatch)
    assert resolve_sandbox("auto") == "docker"
    assert CodeEnv(tasks=echo_task).backend == "docker"
    assert _math_env(python_tool=True).backend == "docker"
    assert make_backend("auto").name == "docker"
    assert make_backend(None).name == "docker"
    # LocalSandbox's own "auto" is bubblewrap or nothing: it never turns into docker or none.
    with pytest.raises(SandboxUnavailable, match="isolation='none'"):
        LocalSandbox()


def test_docker_chosen_for_a_missing_bubblewrap_runs_the_episode(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, echo_task: str
) -> None:
    request.getfixturevalue("docker_pool")  # a daemon and the image, really (else skip/fail)
    monkeypatch.setattr(_bwrap, "why_not_bwrap", lambda: NO_BWRAP)
    env = gym.make("agentgym/Code-v0", tasks=echo_task)
    try:
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(ECHO)
        assert env.unwrapped._sandbox.backend == "docker"
        assert (reward, terminated, info["infra_error"]) == (1.0, True, False)
    finally:
        env.close()


REFUSERS: dict[str, Callable[[], object]] = {
    "Code-v0": lambda: gym.make("agentgym/Code-v0"),
    "Code-MultiTurn-v0": lambda: gym.make("agentgym/Code-MultiTurn-v0"),
    "Math-Python-v0": lambda: _math_env(python_tool=True),
    "SWE-v0": lambda: gym.make("agentgym/SWE-v0"),
    "make_backend": lambda: make_backend("auto"),
    "open_sandbox": lambda: run_sync(open_sandbox()),
}


@pytest.mark.parametrize("make", REFUSERS.values(), ids=REFUSERS.keys())
def test_no_isolating_backend_refuses_and_names_every_fix(
    probes: Callable[..., dict[str, int]], make: Callable[[], object]
) -> None:
    probes(bwrap=NO_BWRAP, docker=NO_DOCKER)
    with pytest.raises(SandboxUnavailable) as caught:
        make()
    message = str(caught.value)
    for needle in (NO_BWRAP, NO_DOCKER, "apt-get install bubblewrap", "docker_setup.sh"):
        assert needle in message
    assert "='unsafe-local'" in message


@pytest.mark.parametrize(
    "make",
    [lambda: LocalSandbox(), lambda: LocalSandbox(isolation="bwrap"), lambda: LocalSWEBackend()],
    ids=["LocalSandbox-auto", "LocalSandbox-bwrap", "LocalSWEBackend"],
)
def test_local_backends_refuse_without_bubblewrap(
    probes: Callable[..., dict[str, int]], make: Callable[[], object]
) -> None:
    probes(bwrap=NO_BWRAP, docker=None)  # docker up changes nothing: "local" is bubblewrap
    with pytest.raises(SandboxUnavailable) as caught:
        make()
    message = str(caught.value)
    assert NO_BWRAP in message
    assert "apt-get install bubblewrap" in message
    assert "isolation='none'" in message


def test_explicit_local_and_docker_refuse_and_point_at_the_other(
    probes: Callable[..., dict[str, int]], echo_task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes(bwrap=NO_BWRAP, docker=NO_DOCKER)
    _host_ok(monkeypatch)
    for sandbox, other in (("local", "sandbox='docker'"), ("docker", "sandbox='local'")):
        with pytest.raises(SandboxUnavailable, match=other):
            CodeEnv(tasks=echo_task, sandbox=sandbox)  # type: ignore[arg-type]
        with pytest.raises(SandboxUnavailable):
            make_backend(sandbox)


def test_math_without_the_tool_runs_no_code_and_needs_no_sandbox(
    probes: Callable[..., dict[str, int]],
) -> None:
    probes(bwrap=NO_BWRAP, docker=NO_DOCKER)
    env = _math_env()
    env.reset(seed=0)
    assert env.step(f"\\boxed{{{env.tasks[0].answer}}}")[2]


def test_unsafe_local_asked_for_by_name_runs_and_warns_once_per_process(
    probes: Callable[..., dict[str, int]],
    fresh_process: None,
    echo_task: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probes(bwrap=NO_BWRAP, docker=NO_DOCKER)
    _host_ok(monkeypatch)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            env = gym.make("agentgym/Code-v0", tasks=echo_task, sandbox="unsafe-local")
            env.reset(seed=0)
            assert env.step(ECHO)[1] == 1.0
            env.close()
        for _ in range(3):
            sandbox = LocalSandbox(isolation="none")
            assert arun(sandbox.run("echo ok", timeout=10)).stdout == "ok\n"
            arun(sandbox.close())
        assert _math_env(python_tool=True, sandbox="unsafe-local").backend == "unsafe-local"
        assert make_backend("unsafe-local").name == "local"
        LocalSWEBackend(isolation="none")
    isolation = [w for w in seen if issubclass(w.category, SandboxIsolationWarning)]
    assert len(isolation) == 1, [str(w.message) for w in isolation]
    assert "NOT isolated" in str(isolation[0].message)


_MANY_UNSAFE = """
import warnings, gymnasium as gym, agentgym
from agentgym.core import run_sync
from agentgym.error import SandboxIsolationWarning
from agentgym.sandbox import LocalSandbox
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for _ in range(4):
        gym.make("agentgym/Code-v0", tasks=%r, sandbox="unsafe-local").close()
        run_sync(LocalSandbox(isolation="none").close())
print(sum(issubclass(w.category, SandboxIsolationWarning) for w in seen))
"""


def test_a_fresh_process_warns_once_over_many_unsafe_envs(echo_task: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _MANY_UNSAFE % echo_task],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1"]


BAD_VALUES: dict[str, Callable[[], object]] = {
    "Code-v0": lambda: gym.make("agentgym/Code-v0", sandbox="bwrap"),
    "Math-v0": lambda: _math_env(sandbox="none"),
    "Math-Python-v0": lambda: _math_env(python_tool=True, sandbox="unsafe"),
    "SWE-v0": lambda: gym.make("agentgym/SWE-v0", sandbox="podman"),
    "make_backend": lambda: make_backend("unisolated"),
    "open_sandbox": lambda: run_sync(open_sandbox("vm")),  # type: ignore[arg-type]
    "LocalSandbox": lambda: LocalSandbox(isolation="unsafe-local"),  # type: ignore[arg-type]
    "LocalSWEBackend": lambda: LocalSWEBackend(isolation="off"),
    "local+none": lambda: make_backend("local", isolation="none"),
    "auto+none": lambda: make_backend("auto", isolation="none"),
    "unsafe+bwrap": lambda: make_backend("unsafe-local", isolation="bwrap"),
}


@pytest.mark.parametrize("make", BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_unknown_or_contradictory_values_raise_config_error_naming_the_choices(
    make: Callable[[], object],
) -> None:
    with pytest.raises(ConfigError) as caught:
        make()
    assert "'auto'" in str(caught.value)


# --- this machine, nothing stood in for ------------------------------------------------------

_ESCAPE = """```python
import socket
try:
    with open({path!r}, "w") as f:
        f.write("out")
except OSError:
    pass
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    print("net:open")
except OSError:
    print("net:blocked")
```"""


@pytest.fixture
def host_folder() -> Iterator[Path]:
    """A folder on the host that anyone may write to (a sandbox's own uid included)."""
    folder = Path(tempfile.mkdtemp(prefix="agentgym-escape-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()


@pytest.fixture
def listener() -> Iterator[tuple[int, list[object]]]:
    """A TCP server on the host's loopback: (port, connections it accepted)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


def _accepted_after(accepted: list[object], seconds: float) -> int:
    """How many connections the listener took, once it had up to ``seconds`` to take one: the
    program's connect completes in the kernel before the listener's thread accepts it."""
    deadline = time.monotonic() + seconds
    while not accepted and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(accepted)


def _escape_task(tmp_path: Path) -> str:
    path = tmp_path / "net.jsonl"
    task = {"task_id": "net", "question": "-", "tests": [{"input": "", "output": "net:blocked"}]}
    path.write_text(json.dumps(task) + "\n")
    return str(path)


def _try_escape(env: Any, folder: Path, port: int) -> float:
    env.reset(seed=0)
    return float(env.step(_ESCAPE.format(path=str(folder / "escaped.txt"), port=port))[1])


def test_the_default_is_isolated_here_and_its_programs_cannot_escape(
    tmp_path: Path, host_folder: Path, listener: tuple[int, list[object]]
) -> None:
    try:
        chosen = resolve_sandbox("auto")
    except SandboxUnavailable as e:
        _unavailable(f"no isolating sandbox on this machine: {e}")
    assert chosen in ("local", "docker")
    if REQUIRED:  # CI installs bubblewrap: the default must take it
        assert chosen == "local"
    port, accepted = listener
    env = gym.make("agentgym/Code-v0", tasks=_escape_task(tmp_path))
    try:
        assert env.unwrapped.backend == chosen
        reward = _try_escape(env, host_folder, port)
    finally:
        env.close()
    assert list(host_folder.iterdir()) == [], "a sandboxed program wrote to the host's files"
    assert _accepted_after(accepted, 1.0) == 0, "a sandboxed program reached the host's network"
    assert reward == 1.0  # the program ran, and saw its connection refused


def test_the_escape_check_catches_an_unisolated_program(
    tmp_path: Path, host_folder: Path, listener: tuple[int, list[object]], fresh_process: None
) -> None:
    # The control of the test above: unisolated, the same program gets out.
    port, accepted = listener
    folder = host_folder
    with pytest.warns(SandboxIsolationWarning):
        env = gym.make("agentgym/Code-v0", tasks=_escape_task(tmp_path), sandbox="unsafe-local")
    try:
        reward = _try_escape(env, folder, port)
    finally:
        env.close()
    assert (folder / "escaped.txt").read_text() == "out"
    assert _accepted_after(accepted, 60.0) == 1
    assert reward == 0.0
