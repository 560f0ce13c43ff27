"""Hostile programs against every backend. Each must end in time, harm nothing outside the
sandbox, leave no process behind (checked when the fixture closes the sandbox) and leave the
sandbox working for the next run.

Limits-only attacks (fork bomb, loops, memory, output, file size) also run against the
unisolated fallback; escapes (files, network, signals) only against the isolating backends.
"""

from __future__ import annotations

import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentgym.error import SandboxFileError
from agentgym.sandbox import Limits, RunResult, Sandbox

from .conftest import arun

SLACK = 10.0  # seconds a killed run may take past its timeout on a loaded 2-core machine


def run_py(sb: Sandbox, code: str, *, timeout: float = 20, **kw: object) -> RunResult:
    started = time.monotonic()
    result = arun(sb.run(["python3", "-c", code], timeout=timeout, **kw))  # type: ignore[arg-type]
    assert time.monotonic() - started < timeout + SLACK, "the run outlived its timeout"
    return result


def count_processes(sb: Sandbox, text: str) -> int:
    """Processes the sandbox can see whose command line contains ``text`` (but the counter's)."""
    code = f"""
import os
me = (str(os.getpid()), str(os.getppid()))  # the counter, and the wrapper that started it
n = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmdline = open(f"/proc/{{pid}}/cmdline", "rb").read().replace(b"\\0", b" ")
    except OSError:
        continue
    n += pid not in me and {text.encode()!r} in cmdline
print(n)
"""
    r = arun(sb.run(["python3", "-c", code], timeout=20))
    assert r.ok, r
    return int(r.stdout)


def assert_still_works(sb: Sandbox) -> None:
    r = arun(sb.run(["python3", "-c", "print(sum(range(10)))"], timeout=30))
    assert r.ok, r
    assert r.stdout == "45\n"


# -- resource exhaustion -----------------------------------------------------------------


@pytest.mark.slow
def test_fork_bomb_shell(sandbox: Sandbox) -> None:
    r = arun(sandbox.run("f() { f | f & }; f; sleep 3", timeout=15, limits=Limits(processes=32)))
    assert r.duration < 15 + SLACK
    assert_still_works(sandbox)


@pytest.mark.slow
def test_fork_bomb_python_hits_the_process_limit(sandbox: Sandbox) -> None:
    code = """
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print("stopped after", n, e.errno)
"""
    r = run_py(sandbox, code, timeout=20, limits=Limits(processes=32))
    assert not r.timed_out, r
    stopped = int(r.stdout.split()[2])
    assert 0 < stopped < 32, r.stdout  # the limit held: fork failed with EAGAIN
    assert_still_works(sandbox)


def test_infinite_loop_times_out(sandbox: Sandbox) -> None:
    r = run_py(sandbox, "while True: pass", timeout=2)
    assert r.timed_out
    assert r.exit_code == 137
    assert not r.ok
    assert 2 <= r.duration < 2 + SLACK
    assert_still_works(sandbox)


def test_timeout_kills_the_whole_tree(sandbox: Sandbox) -> None:
    # Children that ignore SIGTERM and start their own sessions are killed too.
    if not getattr(sandbox, "isolated", True) and os.geteuid() != 0:
        pytest.skip("unisolated and not root: only the run's process group can be killed")
    nap = f"sleep {random.randrange(10**6, 10**7)}"  # unique: unisolated sees host processes
    cmd = (
        f"trap '' TERM HUP; (setsid sh -c 'trap \"\" TERM; {nap}' &); "
        f"sh -c '{nap}' & echo started; while :; do :; done"
    )
    r = arun(sandbox.run(cmd, timeout=2))
    assert r.timed_out
    assert r.stdout == "started\n"
    assert r.duration < 2 + SLACK
    assert count_processes(sandbox, nap) == 0


def test_background_process_ends_with_its_run(sandbox: Sandbox) -> None:
    if not getattr(sandbox, "isolated", True) and os.geteuid() != 0:
        pytest.skip("unisolated and not root: only the run's process group can be killed")
    nap = f"sleep {random.randrange(10**6, 10**7)}"
    r = arun(sandbox.run(f"({nap} &) ; echo left a sleeper", timeout=10))
    assert r.ok
    assert r.duration < 10
    assert count_processes(sandbox, nap) == 0


def test_memory_bomb_at_once(sandbox: Sandbox) -> None:
    r = run_py(sandbox, "x = bytearray(64 * 2**30)", limits=Limits(memory=256 << 20))
    assert r.oom_killed, r
    assert r.exit_code != 0
    assert not r.timed_out
    assert_still_works(sandbox)


@pytest.mark.slow
def test_memory_bomb_gradual(sandbox: Sandbox) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))"
    r = run_py(sandbox, code, timeout=30, limits=Limits(memory=256 << 20))
    assert r.oom_killed, r
    assert r.exit_code != 0
    assert not r.timed_out
    assert_still_works(sandbox)


def _peak_rss_reset() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM, the peak resident set size


def _peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.slow
def test_100mb_of_output_is_capped_without_buffering_it(sandbox: Sandbox) -> None:
    _peak_rss_reset()
    before = _peak_rss()
    code = (
        "import sys\nblock = b'x' * (1 << 20)\nfor _ in range(100):\n"
        "    sys.stdout.buffer.write(block); sys.stderr.buffer.write(block[:1 << 18])"
    )
    r = run_py(sandbox, code, timeout=60, limits=Limits(output=4096))
    assert r.ok, r
    assert r.stdout == "x" * 4096
    assert r.stdout_truncated
    assert r.stderr_truncated
    assert _peak_rss() - before < 64 << 20, "the host buffered the flood"
    assert_still_works(sandbox)


def test_file_size_limit(sandbox: Sandbox) -> None:
    code = "open('big', 'wb').write(b'x' * (8 << 20))"
    r = run_py(sandbox, code, limits=Limits(file_size=1 << 20))
    assert r.exit_code != 0
    size = len(arun(sandbox.read_file("big")))
    assert size <= 1 << 20
    assert_still_works(sandbox)


# -- escapes -----------------------------------------------------------------------------


@pytest.fixture
def host_secrets() -> Iterator[tuple[list[Path], str]]:
    """World-readable secret files in host folders the sandbox must not see."""
    secret, name = f"secret-{uuid.uuid4().hex}", f"agentgym-test-{uuid.uuid4().hex}"
    paths = [Path("/root") / name, Path("/tmp") / name, Path.home() / f"{name}-home"]
    made = []
    for path in paths:
        try:
            path.write_text(secret)
            path.chmod(0o644)
            made.append(path)
        except OSError:
            pass
    assert made
    yield made, secret
    for path in made:
        path.unlink(missing_ok=True)


def test_reading_host_files_fails(isolated: Sandbox, host_secrets: tuple[list[Path], str]) -> None:
    paths, secret = host_secrets
    cmd = "; ".join(f"cat {p}" for p in paths) + "; cat /etc/shadow; ls /root /home; echo done"
    r = arun(isolated.run(cmd, timeout=10))
    assert secret not in r.stdout + r.stderr
    assert r.stdout.endswith("done\n")
    assert not os.path.exists("/var/run/docker.sock") or (
        arun(isolated.run("test -e /var/run/docker.sock", timeout=10)).exit_code != 0
    ), "the Docker socket is visible in the sandbox"
    # and the host-side file API does not follow a planted symlink out of the work dir
    for target in [*paths[:1], Path("/etc/passwd")]:
        assert arun(isolated.run(f"ln -sf {target} leak", timeout=10)).ok
        with pytest.raises(SandboxFileError):
            arun(isolated.read_file("leak"))


def test_writing_outside_the_work_dir_fails(isolated: Sandbox, tmp_path: Path) -> None:
    name = f"agentgym-escape-{uuid.uuid4().hex}"
    targets = [
        f"/{name}",
        f"/etc/{name}",
        f"/usr/{name}",
        f"/root/{name}",
        f"/var/tmp/{name}",
        f"{tmp_path}/{name}",
    ]
    script = "; ".join(f"echo x > {t} 2>/dev/null && echo wrote {t}" for t in targets)
    arun(isolated.run(script, timeout=10))
    for t in targets:
        assert not os.path.exists(t), f"the sandbox wrote {t} on the host"
    r = arun(isolated.run(f"echo x > /usr/{name}", timeout=10))
    assert r.exit_code != 0  # read-only system
    # a symlink planted in the work dir does not redirect the host-side writer
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    assert arun(
        isolated.run(f"ln -sf {victim} trap.txt; mkdir -p d; ln -sfn {tmp_path} d/l", timeout=10)
    ).ok
    for path in ("trap.txt", "d/l/victim.txt"):
        with pytest.raises(SandboxFileError):
            arun(isolated.write_file(path, "pwned"))
    assert victim.read_text() == "untouched"
    assert_still_works(isolated)


def test_network_is_unreachable(isolated: Sandbox) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"""
import socket
for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 80), ("8.8.8.8", 53)]:
    s = socket.socket(); s.settimeout(3)
    print(host, s.connect_ex((host, port)))
"""
        r = run_py(isolated, code, timeout=30)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing from the sandbox reached the host's loopback
    assert r.ok, r
    for line in r.stdout.splitlines():
        assert int(line.split()[1]) != 0, f"connected: {line}"


def test_signalling_the_parent_fails(isolated: Sandbox) -> None:
    me, parent = os.getpid(), os.getppid()
    r = arun(
        isolated.run(f"kill -9 {me} {parent} $PPID 1; kill -9 -1; echo still here", timeout=10)
    )
    assert r.duration < 10
    assert os.getpid() == me  # we are alive to check
    os.kill(parent, 0)
    assert_still_works(isolated)


def test_host_processes_are_invisible(isolated: Sandbox) -> None:
    assert count_processes(isolated, "pytest") == 0
    assert count_processes(isolated, "dockerd") == 0


@pytest.mark.slow
def test_docker_container_memory_limit_kills_and_reports(docker_pool: object) -> None:
    # No address-space rlimit: the container's cgroup limit is what stops the bomb.
    from agentgym.sandbox import open_sandbox

    sb = arun(open_sandbox("docker", memory=256 << 20, limits=Limits(memory=None)))
    try:
        r = run_py(sb, "x = b'x' * (1 << 30)", timeout=60)
        assert r.oom_killed, r
        assert r.exit_code == 137
        assert_still_works(sb)
    finally:
        arun(sb.close())


def test_a_command_cannot_trace_or_read_the_local_helper(
    open_sandbox: Callable[..., Sandbox],
) -> None:
    """The local helper starts every run of its sandbox: a command that could trace it could
    tamper with the runs after its own. (Docker's parent of a command is that run's own
    wrapper shell, which ends with the run.)"""
    isolated = open_sandbox("local")
    code = """
import ctypes, os
parent = os.getppid()
libc = ctypes.CDLL(None, use_errno=True)
print("attach", libc.ptrace(16, parent, 0, 0))  # PTRACE_ATTACH
for what in ("mem", "environ"):
    try:
        with open(f"/proc/{parent}/{what}", "rb") as f:
            f.read(1)
        print(what, "read")
    except OSError as e:
        print(what, type(e).__name__)
"""
    r = run_py(isolated, code)
    assert r.ok, r
    lines = r.stdout.splitlines()
    assert lines[0] == "attach -1"
    assert all(not line.endswith(" read") for line in lines[1:]), lines
    assert_still_works(isolated)


def test_installed_answers_are_hidden_where_the_sandbox_would_see_them(
    open_sandbox: Callable[..., Sandbox],
) -> None:
    """Code the model wrote must not read graded answers (SWE-v0's gold patches in agentgym's
    data, HumanEval's canonical solutions) from a package installed where the sandbox's
    read-only folders show it: agentgym installed in the system's Python (under /usr), say."""
    import shutil
    import tempfile

    import agentgym
    from agentgym.sandbox.local import answer_folders

    package = Path(agentgym.__file__).resolve().parent
    assert str(package) in answer_folders()  # hidden by default, wherever it is installed
    # A site folder the sandbox binds read-only (as it binds /usr), with an installed package
    # holding answers beside one that does not; readable by the sandbox's own uid.
    # Not under /tmp: the sandbox's own /tmp (a tmpfs) would cover it.
    site = Path(tempfile.mkdtemp(prefix="agentgym-site-", dir="/var/tmp"))
    try:
        (site / "answers").mkdir()
        (site / "answers" / "gold.patch").write_text("the answer")
        (site / "public.txt").write_text("fine")
        for path in (site, site / "answers", site / "answers" / "gold.patch", site / "public.txt"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        sb = open_sandbox("local", ro_binds=[str(site)], hide=[str(site / "answers")])
        assert sb._hide == (str(site / "answers"),)
        listing = run_py(sb, f"import os; print(os.listdir({str(site / 'answers')!r}))")
        assert listing.ok, listing
        assert listing.stdout == "[]\n"  # there, empty: not even the file names
        read = run_py(sb, f"print(open({str(site / 'answers' / 'gold.patch')!r}).read())")
        assert not read.ok
        assert "No such file" in read.stderr
        assert run_py(sb, f"print(open({str(site / 'public.txt')!r}).read())").stdout == "fine\n"
        assert_still_works(sb)
        assert open_sandbox("local")._hide == tuple(answer_folders())
    finally:
        shutil.rmtree(site)
