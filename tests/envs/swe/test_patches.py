"""``patch_to_tool_calls``: the edit/create calls of a diff leave the tree ``git apply`` would."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentgym.core.parsing import parse_action
from agentgym.envs.swe import as_action, patch_to_tool_calls
from agentgym.error import ConfigError

BLOCK = "    total = 0\n    for x in xs:\n        total += x\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", "surrogateescape")


def write(repo: Path, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        file = repo / path
        if text is None:
            file.unlink()
        else:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(text.encode())


def read(repo: Path, path: str) -> str | None:
    file = repo / path
    return file.read_bytes().decode() if file.is_file() else None


def tree(repo: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def run_calls(repo: Path, calls: list[dict[str, Any]]) -> None:
    """Do what the env's tools do with ``calls``, strictly (an edit needs one exact match)."""
    for call in calls:
        args = call["arguments"]
        if call["name"] == "bash":
            subprocess.run(["bash", "-c", args["command"]], cwd=repo, check=True)
            continue
        file = repo / args["path"]
        if call["name"] == "create":
            assert args.get("overwrite") or not file.exists()
            write(repo, {args["path"]: args["content"]})
            continue
        text = file.read_bytes().decode()
        assert text.count(args["old_str"]) == 1, args
        file.write_bytes(text.replace(args["old_str"], args["new_str"]).encode())


def roundtrip(tmp_path: Path, before: dict[str, str | None], after: dict[str, str | None]) -> str:
    """Commit ``before``, change to ``after``; check the calls reproduce the change."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write(repo, before)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base", "--allow-empty")
    base = tree(repo)
    write(repo, after)
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached", "HEAD")
    wanted = tree(repo)
    git(repo, "reset", "-q", "--hard")
    assert tree(repo) == base
    calls = patch_to_tool_calls(patch, lambda p: read(repo, p))
    run_calls(repo, calls)
    assert tree(repo) == wanted
    return patch


def test_a_hunk_in_a_repeated_block_is_widened_until_unique(tmp_path: Path) -> None:
    before = f"def a(xs):\n{BLOCK}    return total\n\n\ndef b(xs):\n{BLOCK}    return total\n"
    after = before.replace("    return total\n", "    return total * 2\n", 2).replace(
        "    return total * 2\n", "    return total\n", 1
    )
    roundtrip(tmp_path, {"m.py": before}, {"m.py": after})


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"a.py": "x = 1\n"}, {"a.py": "x = 1\ny = 2"}),  # no newline at the end of the file
        ({"a.py": "x = 1"}, {"a.py": "x = 2\n"}),
        ({"a.py": "a\r\nb\r\nc\r\n"}, {"a.py": "a\r\nB\r\nc\r\n"}),
        ({"a.py": ""}, {"a.py": "now = 'something'\n"}),
        ({"a.py": "".join(f"line {i}\n" for i in range(60))},
         {"a.py": "".join(f"line {i}\n" if i % 20 else f"LINE {i}\n" for i in range(60))}),
        ({"a.py": "keep\n", "old.py": "gone\n"}, {"old.py": None, "pkg/new.py": "hello\n"}),
        ({"a.py": "ä = 'ü'\n"}, {"a.py": "ä = 'ö'\n"}),
    ],
    ids=["eol-added", "eol-removed", "crlf", "empty-file", "many-hunks", "add-delete", "utf8"],
)  # fmt: skip
def test_edge_cases_roundtrip(
    tmp_path: Path, before: dict[str, str | None], after: dict[str, str | None]
) -> None:
    roundtrip(tmp_path, before, after)


def test_a_rename_with_changes_becomes_git_mv_then_edits(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write(repo, {"old/name.py": "".join(f"v{i} = {i}\n" for i in range(20))})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "new").mkdir()
    git(repo, "mv", "old/name.py", "new/name.py")
    write(repo, {"new/name.py": (repo / "new/name.py").read_text().replace("v3 = 3", "v3 = 33")})
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached", "-M", "HEAD")
    wanted = tree(repo)
    git(repo, "reset", "-q", "--hard")
    calls = patch_to_tool_calls(patch, lambda p: read(repo, p))
    assert [c["name"] for c in calls] == ["bash", "edit"]
    run_calls(repo, calls)
    assert tree(repo) == wanted


def test_without_file_text_each_hunk_is_used_as_is() -> None:
    patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n"
    assert patch_to_tool_calls(patch) == [
        {"name": "edit", "arguments": {"path": "a.py", "old_str": "x\ny\n", "new_str": "x\nz\n"}}
    ]


def test_binary_changes_and_mismatched_hunks_are_config_errors() -> None:
    binary = (
        "diff --git a/b.bin b/b.bin\nindex 1..2 100644\nBinary files a/b.bin and b/b.bin differ\n"
    )
    with pytest.raises(ConfigError, match="binary"):
        patch_to_tool_calls(binary)
    patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-y\n+z\n"
    with pytest.raises(ConfigError, match="does not match"):
        patch_to_tool_calls(patch, lambda _: "something else\n")


def test_as_action_is_parsed_back_into_the_same_calls() -> None:
    calls = [{"name": "create", "arguments": {"path": "a.py", "content": "x\n"}}]
    parsed = parse_action(as_action(calls), "hermes", id_prefix="c")
    assert [(c.name, c.arguments) for c in parsed.calls] == [("create", calls[0]["arguments"])]
