"""Host-side access to a work dir that hostile code arranged: symlinks, FIFOs, locked folders."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agentgym.error import SandboxFileError
from agentgym.sandbox._files import WorkdirFiles


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "outside.txt").write_text("host secret")
    return work


@pytest.fixture
def files(root: Path) -> WorkdirFiles:
    return WorkdirFiles(str(root), "/work")


def test_symlinks_inside_the_work_dir_are_followed(root: Path, files: WorkdirFiles) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "real.py").write_text("x = 1\n")
    (root / "rel.py").symlink_to("pkg/real.py")
    (root / "abs.py").symlink_to("/work/pkg/real.py")  # absolute as the sandbox sees it
    (root / "dirlink").symlink_to("pkg")
    (root / "up.py").symlink_to("pkg/../pkg/real.py")
    for name in ("rel.py", "abs.py", "dirlink/real.py", "up.py", "/work/dirlink/real.py"):
        assert files.read(name) == b"x = 1\n", name
    files.write("dirlink/new.py", b"y")
    assert (root / "pkg" / "new.py").read_bytes() == b"y"


@pytest.mark.parametrize("target", ["../outside.txt", "/etc/passwd", "../../../../etc/passwd"])
def test_symlinks_out_of_the_work_dir_stay_inside(
    root: Path, files: WorkdirFiles, target: str
) -> None:
    """An absolute target outside is refused; a relative one is clamped at the work dir."""
    (root / "leak").symlink_to(target)
    passwd = Path("/etc/passwd").read_bytes()
    try:
        data = files.read("leak")
    except SandboxFileError:
        data = b""
    assert b"host secret" not in data
    assert b"root:" not in data
    try:
        files.write("leak", b"pwned")
    except SandboxFileError:
        assert target.startswith("/")
    else:
        assert not target.startswith("/")
        written = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        assert [p.read_bytes() for p in written] == [b"pwned"]  # it landed inside
    assert (root.parent / "outside.txt").read_text() == "host secret"
    assert Path("/etc/passwd").read_bytes() == passwd


def test_dotdot_is_clamped_at_the_root(root: Path, files: WorkdirFiles) -> None:
    (root / "a.txt").write_text("inside")
    assert files.read("../../a.txt") == b"inside"  # like RESOLVE_IN_ROOT: / is the work dir
    with pytest.raises(SandboxFileError):
        files.read("/etc/passwd")
    with pytest.raises(SandboxFileError):
        files.read("/work/../etc/passwd")


def test_symlink_loops_end(root: Path, files: WorkdirFiles) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    with pytest.raises(SandboxFileError) as e:
        files.read("a")
    assert e.value.errno == 40  # ELOOP


def test_a_fifo_does_not_block_the_host(root: Path, files: WorkdirFiles) -> None:
    os.mkfifo(root / "pipe")
    result: list[BaseException] = []

    def read() -> None:
        try:
            files.read("pipe")
        except BaseException as e:
            result.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(result[0], SandboxFileError)
    with pytest.raises(SandboxFileError):
        files.write("pipe", b"x")


def test_locked_folders_are_still_removed(root: Path, files: WorkdirFiles) -> None:
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "f").write_text("x")
    (root / "d" / "e").chmod(0)
    (root / "d").chmod(0)
    files.clear()
    assert list(root.iterdir()) == []
    files.remove()
    assert not root.exists()


def test_bad_paths(files: WorkdirFiles) -> None:
    for path in ("", ".", "/work", "a\0b"):
        with pytest.raises(SandboxFileError):
            files.read(path)
    with pytest.raises(SandboxFileError):
        files.upload("/no/such/folder", ".")
