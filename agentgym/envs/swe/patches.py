"""Turn a unified git diff (e.g. an instance's gold ``patch``) into the SWE env's tool calls.

``patch_to_tool_calls(patch, read)`` gives ``[{"name": "edit" | "create" | "bash",
"arguments": {...}}, ...]`` that, run in order in the repository, leave it as ``git apply``
would: a new file is one ``create``, each hunk of a changed file one ``edit`` whose ``old_str``
is widened with neighbouring lines until it occurs exactly once, a deleted or renamed file a
``bash`` ``rm`` / ``git mv``. ``read(path)`` returns a file's text at the base commit (``None``
if it has none); without it each hunk's own text is used and uniqueness is not checked.
``as_action(calls)`` makes an assistant message with structured ``tool_calls`` (SFT data, or a
scripted agent); ``gold_tool_calls(instance)`` gives the calls of an instance's gold patch.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.core.types import Message, assistant, tool_call
from agentgym.envs.swe.instances import SWEInstance
from agentgym.envs.swe.repo import materialize

__all__ = ["as_action", "gold_tool_calls", "patch_to_tool_calls"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class _Hunk:
    old_start: int
    old_left: int  # lines of the old side still to read
    new_left: int
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" " | "-" | "+", text)

    def text(self, tags: str) -> list[str]:
        return [text for tag, text in self.lines if tag in tags]

    def add(self, line: str) -> None:
        if line.startswith("\\"):  # "\ No newline at end of file": the previous line has none
            tag, text = self.lines[-1]
            self.lines[-1] = (tag, text.removesuffix("\n"))
            return
        tag = line[:1] or " "  # an empty line is context whose space was stripped
        self.lines.append((tag, line[1:] + "\n"))
        self.old_left -= tag in " -"
        self.new_left -= tag in " +"

    def wants(self, line: str) -> bool:
        if line.startswith("\\"):
            return bool(self.lines)
        return (self.old_left > 0 or self.new_left > 0) and line[:1] in ("", " ", "-", "+")


@dataclass
class _File:
    old: str | None = None  # None: /dev/null
    new: str | None = None
    hunks: list[_Hunk] = field(default_factory=list)
    binary: bool = False
    new_mode: str | None = None


def _name(raw: str) -> str | None:
    name = raw.split("\t", 1)[0].strip()
    if name.startswith('"') and name.endswith('"'):
        name = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        name = name.encode("latin-1").decode("utf-8")
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def _parse(patch: str) -> list[_File]:
    files: list[_File] = []
    current: _File | None = None
    for line in patch.split("\n"):
        if current is not None and current.hunks and current.hunks[-1].wants(line):
            current.hunks[-1].add(line)
        elif line.startswith("diff --git "):
            current = _File()
            files.append(current)
            parts = line[len("diff --git ") :].split(" b/", 1)
            current.old = current.new = parts[-1] if len(parts) == 2 else None
        elif current is not None:
            _header(current, line)
    return files


def _header(current: _File, line: str) -> None:
    if line.startswith("--- "):
        current.old = _name(line[4:])
    elif line.startswith("+++ "):
        current.new = _name(line[4:])
    elif line.startswith(("rename from ", "rename to ")):
        _rename(current, line)
    elif line.startswith(("new mode ", "new file mode ")):
        current.new_mode = line.rsplit(" ", 1)[1]
        current.old = None if line.startswith("new file") else current.old
    elif line.startswith("deleted file mode "):
        current.new = None
    elif line.startswith(("GIT binary patch", "Binary files ")):
        current.binary = True
    elif match := _HUNK.match(line):
        old_len, new_len = (1 if n is None else int(n) for n in match.group(2, 4))
        current.hunks.append(_Hunk(int(match.group(1)), old_len, new_len))


def _rename(current: _File, line: str) -> None:
    if line.startswith("rename from "):
        current.old = line[len("rename from ") :]
    else:
        current.new = line[len("rename to ") :]


def patch_to_tool_calls(
    patch: str, read: Callable[[str], str | None] | None = None
) -> list[dict[str, Any]]:
    """The ``edit`` / ``create`` / ``bash`` calls that apply ``patch``; see the module docstring.

    Raises ``ConfigError`` for what the tools cannot express (binary files) or a hunk that
    does not match ``read``'s text.
    """
    calls: list[dict[str, Any]] = []
    for file in _parse(patch):
        if file.binary:
            raise ConfigError("patch", file.new or file.old, "changes a binary file", "drop it")
        if file.new is None:
            calls.append(_bash(f"rm -f -- {shlex.quote(file.old or '')}"))
            continue
        if file.old is None:
            content = "".join(file.hunks[0].text(" +")) if file.hunks else ""
            calls.append({"name": "create", "arguments": {"path": file.new, "content": content}})
        else:
            if file.old != file.new:
                old, new = shlex.quote(file.old), shlex.quote(file.new)
                calls.append(_bash(f'mkdir -p -- "$(dirname -- {new})" && git mv -- {old} {new}'))
            base = read(file.old) if read is not None else None
            calls.extend(_edits(file, base))
        if file.new_mode == "100755" or (file.new_mode == "100644" and file.old is not None):
            flag = "+x" if file.new_mode == "100755" else "-x"
            calls.append(_bash(f"chmod {flag} -- {shlex.quote(file.new)}"))
    return calls


def _bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


def _edits(file: _File, base: str | None) -> list[dict[str, Any]]:
    path = file.new or ""
    if base is None:
        return [_edit(path, "".join(h.text(" -")), "".join(h.text(" +"))) for h in file.hunks]
    lines = base.splitlines(keepends=True)
    calls, offset, unique = [], 0, True
    for hunk in file.hunks:
        old, new = hunk.text(" -"), hunk.text(" +")
        at = hunk.old_start - 1 + offset + (0 if old else 1)  # "-k,0" means: insert after k
        if lines[at : at + len(old)] != old:
            raise ConfigError(
                "patch", path, f"its hunk at line {hunk.old_start} does not match the file", ""
            )
        window = _unique_window(lines, at, at + len(old))
        if window is None:
            unique = False
        else:
            start, end = window
            after = [*lines[start:at], *new, *lines[at + len(old) : end]]
            calls.append(_edit(path, "".join(lines[start:end]), "".join(after)))
        lines[at : at + len(old)] = new
        offset += len(new) - len(old)
    if not unique:  # e.g. an empty file: write the whole result instead
        content = "".join(lines)
        return [
            {"name": "create", "arguments": {"path": path, "content": content, "overwrite": True}}
        ]
    return calls


def _unique_window(lines: list[str], start: int, end: int) -> tuple[int, int] | None:
    """The smallest widening of ``lines[start:end]`` occurring once, at its place (or None)."""
    text = "".join(lines)
    while True:
        chunk = "".join(lines[start:end])
        at = len("".join(lines[:start]))
        if chunk and text.find(chunk) == at and text.count(chunk) == 1:
            return start, end
        if start == 0 and end == len(lines):
            return None
        end = min(len(lines), end + 1)
        start = max(0, start - 1)


def _edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"name": "edit", "arguments": {"path": path, "old_str": old, "new_str": new}}


def as_action(calls: list[dict[str, Any]], content: str = "", id_prefix: str = "call_") -> Message:
    """An assistant message making ``calls`` as structured OpenAI ``tool_calls``."""
    made = [tool_call(f"{id_prefix}{i}", c["name"], c["arguments"]) for i, c in enumerate(calls)]
    return assistant(content, made)


def gold_tool_calls(instance: SWEInstance) -> list[dict[str, Any]]:
    """The tool calls applying ``instance.patch``, made against a checkout at ``base_commit``."""
    if not instance.patch:
        raise ConfigError(f"instance {instance.instance_id!r}: patch", None, "is empty", "add it")
    with tempfile.TemporaryDirectory(prefix="agentgym-gold-") as tmp:
        root = materialize(instance, Path(tmp) / "repo")

        def read(path: str) -> str | None:
            file = root / path
            # Bytes decoded by hand: read_text would turn "\r\n" into "\n".
            return file.read_bytes().decode("utf-8", "surrogateescape") if file.is_file() else None

        return patch_to_tool_calls(instance.patch, read)
