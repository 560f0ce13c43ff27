"""Read one project of scripts/swe_tasks/ and rebuild the file tree of each of its commits.

A project folder holds::

    project.toml         name, summary, start date, authors, the first commit's message/version
    tree/                the files at the newest commit, every fix applied: a normal little
                         library whose tests pass (edit it like any project)
    history/NNN-*.toml   one commit each, oldest first; its ``[[edit]]`` tables turn the tree
                         before the commit into the tree after it

Only the newest tree is stored whole, so the history is replayed backwards from it: undoing the
edits of the newest commit gives the tree before it, and so on; what is left is the first commit.
An edit is one of::

    path, old, new     replace the single occurrence of ``old`` by ``new``
    path, append       add text at the end of the file
    path, add = true   the commit creates the file (with its content at that point of history)

A commit with a ``[task]`` table (number, difficulty, problem_statement) fixes a bug: its parent
is the task's base commit, its changes to test files are the test patch and its other changes
the gold patch. Adding a task means: fix the bug in tree/ (code and tests), then add a history
file whose edits turn the buggy code into the fixed code and add the tests.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

DIFFICULTIES = ("easy", "medium", "hard")
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache"}

Tree = dict[str, str]


class SpecError(Exception):
    """A project folder that cannot be replayed; the message names the file and the edit."""


@dataclass(frozen=True)
class Edit:
    path: str
    old: str | None = None
    new: str | None = None
    append: str | None = None
    add: bool = False

    def revert(self, tree: Tree, where: str) -> None:
        """Turn ``tree`` (after the edit) into the tree before it, in place."""
        if self.add:
            if tree.pop(self.path, None) is None:
                raise SpecError(f"{where}: added file {self.path} is not in the later tree")
            return
        text = tree.get(self.path)
        if text is None:
            raise SpecError(f"{where}: {self.path} is not in the later tree")
        if self.append is not None:
            if not text.endswith(self.append):
                raise SpecError(f"{where}: {self.path} does not end with the appended text")
            tree[self.path] = text[: len(text) - len(self.append)]
            return
        if self.old is None or self.new is None:
            raise SpecError(f"{where}: an edit needs old+new, append or add = true")
        if text.count(self.new) != 1:
            found = text.count(self.new)
            raise SpecError(f"{where}: 'new' occurs {found} times in {self.path}, expected once")
        before = text.replace(self.new, self.old)
        if before.count(self.old) != 1:
            raise SpecError(f"{where}: 'old' would be ambiguous in {self.path}; widen it")
        tree[self.path] = before


@dataclass(frozen=True)
class TaskSpec:
    number: int
    difficulty: str
    problem_statement: str


@dataclass(frozen=True)
class Commit:
    source: str
    message: str
    author: int
    version: str | None
    edits: tuple[Edit, ...]
    task: TaskSpec | None


@dataclass(frozen=True)
class Author:
    name: str
    email: str


@dataclass(frozen=True)
class Project:
    name: str
    summary: str
    start: datetime
    authors: tuple[Author, ...]
    initial: Commit
    commits: tuple[Commit, ...]
    tree: Tree

    def snapshots(self) -> list[Tree]:
        """The tree after each commit: the first commit, then each history commit in order."""
        tree = dict(self.tree)
        later: list[Tree] = []
        for commit in reversed(self.commits):
            later.append(dict(tree))
            for index, edit in reversed(list(enumerate(commit.edits))):
                edit.revert(tree, f"{self.name}/history/{commit.source} edit {index + 1}")
        return [tree, *reversed(later)]


def _edit(table: dict[str, Any], where: str) -> Edit:
    path = table.get("path")
    if not isinstance(path, str):
        raise SpecError(f"{where}: every [[edit]] needs a 'path'")
    kinds = [key for key in ("old", "append", "add") if key in table]
    if len(kinds) != 1 or ("old" in table) != ("new" in table):
        raise SpecError(f"{where}: an edit has either old+new, append, or add = true")
    if "old" in table and not table["new"]:
        raise SpecError(f"{where}: 'new' must not be empty (include surrounding lines)")
    return Edit(
        path, table.get("old"), table.get("new"), table.get("append"), bool(table.get("add"))
    )


def _task(table: dict[str, Any] | None, where: str) -> TaskSpec | None:
    if table is None:
        return None
    task = TaskSpec(int(table["number"]), table["difficulty"], table["problem_statement"].strip())
    if task.difficulty not in DIFFICULTIES:
        raise SpecError(f"{where}: difficulty {task.difficulty!r} is not one of {DIFFICULTIES}")
    return task


def _commit(data: dict[str, Any], source: str, n_authors: int) -> Commit:
    author = int(data.get("author", 0))
    if not 0 <= author < n_authors:
        raise SpecError(f"{source}: author {author} is not an index into project.toml's authors")
    edits = tuple(_edit(e, f"{source} edit {i + 1}") for i, e in enumerate(data.get("edit", [])))
    task = _task(data.get("task"), source)
    return Commit(source, data["message"].strip(), author, data.get("version"), edits, task)


def _read_tree(root: Path) -> Tree:
    tree: Tree = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_dir() or SKIPPED_PARTS & set(relative.parts) or path.suffix == ".pyc":
            continue
        text = path.read_text(encoding="utf-8")
        if "\r" in text:
            raise SpecError(f"{path}: use LF line endings")
        tree[relative.as_posix()] = text
    return tree


def load_project(folder: Path) -> Project:
    """Read ``folder`` (scripts/swe_tasks/<name>); raises SpecError on malformed data."""
    meta = tomllib.loads((folder / "project.toml").read_text(encoding="utf-8"))
    authors = tuple(Author(a["name"], a["email"]) for a in meta["author"])
    initial = _commit(meta["initial"], "project.toml", len(authors))
    history = sorted((folder / "history").glob("*.toml"))
    commits = tuple(
        _commit(tomllib.loads(p.read_text(encoding="utf-8")), p.name, len(authors)) for p in history
    )
    if meta["name"] != folder.name:
        raise SpecError(f"{folder}: project.toml names {meta['name']!r}, expected {folder.name!r}")
    start = datetime.fromisoformat(meta["start"])
    return Project(
        meta["name"], meta["summary"], start, authors, initial, commits, _read_tree(folder / "tree")
    )
