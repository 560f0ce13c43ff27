"""What every backend does for well-behaved commands: stdin, exit codes, files, folders, reset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentgym.error import ConfigError, SandboxError, SandboxFileError
from agentgym.sandbox import Limits, Sandbox

from .conftest import arun


def test_stdout_stderr_and_exit_code(sandbox: Sandbox) -> None:
    r = arun(sandbox.run("echo out; echo err >&2; exit 3", timeout=10))
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not (r.timed_out)
    assert not (r.oom_killed)
    assert not (r.truncated)
    assert not (r.ok)
    assert r.duration > 0


def test_argv_is_not_parsed_by_a_shell(sandbox: Sandbox) -> None:
    r = arun(
        sandbox.run(
            ["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "$HOME;"], timeout=10
        )
    )
    assert r.ok
    assert r.stdout == "['a b', '$HOME;']\n"


def test_stdin_is_passed_and_closed(sandbox: Sandbox) -> None:
    r = arun(
        sandbox.run(
            ["python3", "-c", "import sys; print(sys.stdin.read()[::-1])"],
            stdin="héllo\n" * 3,
            timeout=10,
        )
    )
    assert r.ok
    assert r.stdout == ("héllo\n" * 3)[::-1] + "\n"
    big = b"x" * (3 << 20)  # more than any pipe buffer holds
    r = arun(
        sandbox.run(
            ["python3", "-c", "import sys; print(len(sys.stdin.buffer.read()))"],
            stdin=big,
            timeout=30,
        )
    )
    assert r.stdout == f"{len(big)}\n"


def test_no_stdin_reads_eof(sandbox: Sandbox) -> None:
    r = arun(
        sandbox.run(["python3", "-c", "import sys; print(repr(sys.stdin.read()))"], timeout=10)
    )
    assert r.stdout == "''\n"


def test_stdin_a_command_ignores_does_not_hang(sandbox: Sandbox) -> None:
    r = arun(sandbox.run("exit 0", stdin=b"y" * (1 << 20), timeout=10))
    assert r.ok


def test_missing_command_is_exit_127(sandbox: Sandbox) -> None:
    r = arun(sandbox.run(["no-such-program-xyz"], timeout=10))
    assert r.exit_code == 127
    assert not r.timed_out


def test_killed_by_signal_reports_128_plus_signal(sandbox: Sandbox) -> None:
    r = arun(sandbox.run(["python3", "-c", "import os; os.kill(os.getpid(), 15)"], timeout=10))
    assert r.exit_code == 128 + 15


def test_env_and_cwd(sandbox: Sandbox) -> None:
    arun(sandbox.write_file("sub/marker.txt", "here\n"))
    r = arun(
        sandbox.run(
            "echo $GREETING; cat marker.txt; pwd", env={"GREETING": "hi"}, cwd="sub", timeout=10
        )
    )
    assert r.ok, r
    assert r.stdout.splitlines() == ["hi", "here", f"{sandbox.workdir}/sub"]


def test_files_round_trip(sandbox: Sandbox) -> None:
    arun(sandbox.write_file("a/b/c.bin", bytes(range(256))))
    assert arun(sandbox.read_file("a/b/c.bin")) == bytes(range(256))
    assert arun(sandbox.read_file(f"{sandbox.workdir}/a/b/c.bin")) == bytes(range(256))
    r = arun(
        sandbox.run(["python3", "-c", "open('made.txt','w').write('by the sandbox')"], timeout=10)
    )
    assert r.ok, r
    assert arun(sandbox.read_file("made.txt")) == b"by the sandbox"
    # a file written by the host can be changed by sandboxed code
    arun(sandbox.write_file("script.sh", "echo run\n", mode=0o755))
    r = arun(sandbox.run("./script.sh && echo more >> script.sh && cat script.sh", timeout=10))
    assert r.stdout == "run\necho run\nmore\n"


def test_missing_file_and_folder_are_sandbox_file_errors(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxFileError) as e:
        arun(sandbox.read_file("nope.txt"))
    assert e.value.errno == 2
    arun(sandbox.write_file("d/x", ""))
    with pytest.raises(SandboxFileError):
        arun(sandbox.read_file("d"))
    with pytest.raises(SandboxFileError):
        arun(sandbox.read_file("/etc/passwd"))


def test_upload_a_folder(sandbox: Sandbox, tmp_path: Path) -> None:
    src = tmp_path / "repo"
    (src / "pkg" / "empty").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("VALUE = 42\n")
    (src / "run.sh").write_text("#!/bin/sh\npython3 -c 'import pkg; print(pkg.VALUE)'\n")
    (src / "run.sh").chmod(0o755)
    (src / "link.py").symlink_to("pkg/__init__.py")
    arun(sandbox.upload(src, "proj"))
    r = arun(sandbox.run("./run.sh && cat link.py && test -d pkg/empty", cwd="proj", timeout=10))
    assert r.ok, r
    assert r.stdout == "42\nVALUE = 42\n"


def test_runs_share_the_work_dir_and_are_independent(sandbox: Sandbox) -> None:
    assert arun(sandbox.run("echo 1 > counter", timeout=10)).ok
    r = arun(sandbox.run("cat counter; echo $$", timeout=10))
    assert r.stdout.startswith("1\n")


def test_reset_empties_the_work_dir(sandbox: Sandbox) -> None:
    arun(sandbox.write_file("old.txt", "x"))
    assert arun(sandbox.run("echo t > $TMPDIR/t && ls $TMPDIR/t", timeout=10)).ok
    arun(sandbox.reset())
    r = arun(sandbox.run("ls -A .; ls $TMPDIR/t", timeout=10))
    assert r.stdout == ""
    assert r.exit_code != 0
    assert arun(sandbox.run("echo fresh", timeout=10)).stdout == "fresh\n"


def test_output_is_capped_per_run(sandbox: Sandbox) -> None:
    r = arun(
        sandbox.run("head -c 5000 /dev/zero | tr '\\0' a", limits=Limits(output=100), timeout=10)
    )
    assert r.stdout == "a" * 100
    assert r.stdout_truncated
    assert not r.stderr_truncated


def test_close_is_idempotent_and_final(sandbox: Sandbox) -> None:
    arun(sandbox.close())
    arun(sandbox.close())
    with pytest.raises(SandboxError):
        arun(sandbox.run("true", timeout=5))


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), "5", True])
def test_bad_timeout_is_a_config_error(sandbox: Sandbox, timeout: object) -> None:
    with pytest.raises(ConfigError, match="timeout"):
        arun(sandbox.run("true", timeout=timeout))  # type: ignore[arg-type]


def test_bad_command_is_a_config_error(sandbox: Sandbox) -> None:
    for cmd in ([], [1, 2], ["ok", None]):
        with pytest.raises(ConfigError, match="cmd"):
            arun(sandbox.run(cmd, timeout=5))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"memory": 1},
        {"processes": 0},
        {"file_size": -5},
        {"cpu_seconds": 1.5},
        {"output": -1},
        {"memory": True},
    ],
)
def test_bad_limits_are_config_errors(kwargs: dict[str, object]) -> None:
    name = next(iter(kwargs))
    with pytest.raises(ConfigError, match=f"Limits.{name}"):
        Limits(**kwargs)  # type: ignore[arg-type]


def test_limits_none_means_unlimited() -> None:
    assert Limits(memory=None, processes=None, file_size=None).rlimits(2.5) == {"cpu": 4, "core": 0}
    assert os.cpu_count()
