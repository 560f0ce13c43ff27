"""SWE task instances: the shipped set, or a user's SWE-bench / SWE-Gym / R2E-Gym style JSONL.

One JSON object per line (a ``.json`` file holding a list works too). Fields, with the other
spellings accepted for each (the first one is the SWE-bench name):

- ``instance_id`` (``id``, ``task_id``): unique string, e.g. ``"minicsv__minicsv-3"``.
- ``repo`` (``repo_name``): an ``owner/name`` label; defaults to ``repo_path``'s stem.
- ``repo_path`` (``repo_dir``, ``local_repo``): the repository, on this machine: a git work
  tree or bare repository, a ``git bundle`` (``.bundle``), or a ``.tar`` / ``.tar.gz`` /
  ``.tgz`` / ``.zip`` archive of one. A relative path is relative to the JSONL file's folder.
  Nothing is cloned over the network; it may be left out only when ``image`` holds the repo.
- ``base_commit`` (``commit_hash``, ``commit``): the commit the agent starts from.
- ``problem_statement`` (``issue``, ``problem``): the bug report shown to the agent.
- ``test_patch``: a unified git diff adding the tests that check the fix (may be empty).
- ``patch`` (``gold_patch``): the reference fix, optional.
- ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` (lower case too): pytest node ids relative to the
  repository root, as a list or as a JSON string of a list (SWE-bench files store strings).
  ``FAIL_TO_PASS`` must not be empty: an instance no change can fail would reward doing nothing.
- ``image`` (``image_name``, ``docker_image``): a docker image holding the repository, optional.
- ``setup`` (``setup_commands``): shell commands run once in the repository after checkout
  (offline), a string or a list.

Every other field is kept in ``SWEInstance.extra`` and comes back in ``to_dict()``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from agentgym.core.errors import ConfigError
from agentgym.core.tools import clip

__all__ = ["DATA_DIR", "SWEInstance", "load_instances", "read_instances"]

DATA_DIR = Path(__file__).parent / "data"
"""The shipped task set: ``instances.jsonl`` and the repositories under ``repos/``."""

_ALIASES: dict[str, tuple[str, ...]] = {
    "instance_id": ("instance_id", "id", "task_id"),
    "repo": ("repo", "repo_name"),
    "repo_path": ("repo_path", "repo_dir", "local_repo"),
    "base_commit": ("base_commit", "commit_hash", "commit"),
    "problem_statement": ("problem_statement", "issue", "problem"),
    "test_patch": ("test_patch",),
    "patch": ("patch", "gold_patch"),
    "FAIL_TO_PASS": ("FAIL_TO_PASS", "fail_to_pass"),
    "PASS_TO_PASS": ("PASS_TO_PASS", "pass_to_pass"),
    "image": ("image", "image_name", "docker_image"),
    "setup": ("setup", "setup_commands"),
}
_REQUIRED = ("instance_id", "base_commit", "problem_statement", "FAIL_TO_PASS")


@dataclass(frozen=True)
class SWEInstance:
    """One task: a repository at a commit, a bug report, and the tests that judge a fix."""

    instance_id: str
    repo: str
    repo_path: Path | None
    """Absolute path of the local git dir, bundle or archive (``None``: the image has it)."""
    base_commit: str
    problem_statement: str
    test_patch: str
    patch: str | None
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    image: str | None = None
    setup: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The record's other fields (``version``, ``difficulty``, ``hints_text``, ...)."""

    @property
    def task_id(self) -> str:
        """The id ``reset(options={"task_id": ...})`` takes."""
        return self.instance_id

    @property
    def test_files(self) -> tuple[str, ...]:
        """The files holding ``FAIL_TO_PASS`` and ``PASS_TO_PASS``, in first-seen order."""
        files = (test.split("::", 1)[0] for test in (*self.fail_to_pass, *self.pass_to_pass))
        return tuple(dict.fromkeys(files))

    def to_dict(self) -> dict[str, Any]:
        """The SWE-bench-style record (test ids as lists, ``repo_path`` absolute)."""
        return {
            **dict(self.extra),
            "instance_id": self.instance_id,
            "repo": self.repo,
            "repo_path": None if self.repo_path is None else str(self.repo_path),
            "base_commit": self.base_commit,
            "problem_statement": self.problem_statement,
            "test_patch": self.test_patch,
            "patch": self.patch,
            "FAIL_TO_PASS": list(self.fail_to_pass),
            "PASS_TO_PASS": list(self.pass_to_pass),
            "image": self.image,
            "setup": list(self.setup),
        }


def load_instances(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The instances of JSONL file ``path`` (the shipped set when ``None``) as SWE-bench dicts."""
    return [instance.to_dict() for instance in read_instances(path)]


def read_instances(
    source: str | Path | Sequence[Mapping[str, Any]] | None = None,
) -> list[SWEInstance]:
    """Typed instances from a JSONL / JSON file, a list of dicts, or the shipped set (``None``).

    Relative ``repo_path``s are relative to the file's folder (the current directory for dicts).
    Raises ``ConfigError`` naming the line, the field and the fix.
    """
    if source is None:
        source = DATA_DIR / "instances.jsonl"
        if not source.is_file():
            raise ConfigError(
                "tasks",
                None,
                f"the shipped task set is missing ({source} does not exist)",
                "reinstall agentgym, or pass tasks='your.jsonl'",
            )
    if isinstance(source, str | Path):
        path = Path(source).expanduser()
        records = _read_file(path)
        base, where = path.resolve().parent, path.name
    elif isinstance(source, Sequence) and all(isinstance(r, Mapping) for r in source):
        records = [(i, dict(cast(Mapping[str, Any], r))) for i, r in enumerate(source, 1)]
        base, where = Path.cwd(), "instances"
    else:
        raise ConfigError(
            "tasks",
            clip(repr(source), 200),
            "must be a path to a JSONL file or a list of dicts",
            "pass tasks='tasks.jsonl' or a list of SWE-bench-style dicts",
        )
    instances = [_instance(record, base, f"{where} line {n}") for n, record in records]
    _check_unique(instances, where)
    if not instances:
        raise ConfigError("tasks", str(source), "holds no instance", "add at least one")
    return instances


def _read_file(path: Path) -> list[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise ConfigError("tasks", str(path), "is not a file", "pass the path of a .jsonl")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json" and text.lstrip().startswith("["):
        return _records(enumerate(json.loads(text), 1), path.name)
    lines = ((n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip())
    return _records(((n, _json_line(line, path.name, n)) for n, line in lines), path.name)


def _json_line(line: str, where: str, n: int) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{where} line {n}",
            clip(line, 80),
            f"is not valid JSON ({e.msg} at column {e.colno})",
            "write one JSON object per line",
        ) from None


def _records(items: Iterable[tuple[int, Any]], where: str) -> list[tuple[int, dict[str, Any]]]:
    records = []
    for n, record in items:
        if not isinstance(record, dict):
            raise ConfigError(
                f"{where} line {n}", clip(repr(record), 80), "is not a JSON object", "write {...}"
            )
        records.append((n, record))
    return records


def _pick(record: dict[str, Any], name: str) -> tuple[str, Any]:
    """The spelling of field ``name`` the record uses, and its value (``None`` when absent)."""
    for spelling in _ALIASES[name]:
        if record.get(spelling) is not None:
            return spelling, record[spelling]
    return name, None


def _instance(record: dict[str, Any], base: Path, where: str) -> SWEInstance:
    values: dict[str, Any] = {}
    for name in _ALIASES:
        spelling, value = _pick(record, name)
        if value is None and name in _REQUIRED:
            raise ConfigError(
                f"{where}, field {name!r}",
                None,
                "is missing",
                f"add {name!r} (also read as: {', '.join(_ALIASES[name][1:]) or 'no other name'})",
            )
        values[name] = (spelling, value)
    known = {spelling for names in _ALIASES.values() for spelling in names}
    image = _optional_str(values["image"], where)
    repo_path = _repo_path(values["repo_path"], base, where, has_image=image is not None)
    return SWEInstance(
        instance_id=_text(values["instance_id"], where, nonempty=True),
        repo=_optional_str(values["repo"], where) or _default_repo(repo_path),
        repo_path=repo_path,
        base_commit=_text(values["base_commit"], where, nonempty=True),
        problem_statement=_text(values["problem_statement"], where, nonempty=True),
        test_patch=_optional_str(values["test_patch"], where) or "",
        patch=_optional_str(values["patch"], where),
        fail_to_pass=_test_ids(values["FAIL_TO_PASS"], where, nonempty=True),
        pass_to_pass=_test_ids(values["PASS_TO_PASS"], where, nonempty=False),
        image=image,
        setup=_commands(values["setup"], where),
        extra=MappingProxyType({k: v for k, v in record.items() if k not in known}),
    )


def _text(field_value: tuple[str, Any], where: str, *, nonempty: bool) -> str:
    spelling, value = field_value
    if not isinstance(value, str) or (nonempty and not value.strip()):
        rule = "must be a non-empty string" if nonempty else "must be a string"
        raise ConfigError(f"{where}, field {spelling!r}", clip(repr(value), 80), rule, "fix it")
    return value


def _optional_str(field_value: tuple[str, Any], where: str) -> str | None:
    return None if field_value[1] is None else _text(field_value, where, nonempty=False)


def _test_ids(field_value: tuple[str, Any], where: str, *, nonempty: bool) -> tuple[str, ...]:
    spelling, value = field_value
    if value is None:
        value = []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    ok = isinstance(value, list) and all(isinstance(t, str) and t.strip() for t in value)
    if not ok or (nonempty and not value):
        raise ConfigError(
            f"{where}, field {spelling!r}",
            clip(repr(field_value[1]), 120),
            "must be a non-empty list of pytest node ids"
            if nonempty
            else "must be a list of pytest node ids",
            'write e.g. ["tests/test_x.py::test_a"] (or that list as a JSON string)',
        )
    return tuple(value)


def _commands(field_value: tuple[str, Any], where: str) -> tuple[str, ...]:
    spelling, value = field_value
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list) and all(isinstance(c, str) for c in value):
        return tuple(value)
    raise ConfigError(
        f"{where}, field {spelling!r}",
        clip(repr(value), 120),
        "must be a shell command or a list of them",
        'write e.g. ["pip install -e . --no-deps"]',
    )


def _repo_path(
    field_value: tuple[str, Any], base: Path, where: str, *, has_image: bool
) -> Path | None:
    spelling, value = field_value
    if value is None:
        if has_image:
            return None
        raise ConfigError(
            f"{where}, field 'repo_path'",
            None,
            "is missing: the repository must be on this machine (nothing is cloned)",
            "add repo_path: a git dir, a .bundle or a .tar/.tar.gz/.zip archive, relative to "
            "the JSONL file's folder",
        )
    path = Path(_text((spelling, value), where, nonempty=True)).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.exists():
        raise ConfigError(
            f"{where}, field {spelling!r}",
            value,
            f"names nothing on this machine ({path})",
            "point it at a git dir, a .bundle or an archive; relative paths start at the "
            "JSONL file's folder",
        )
    return path.resolve()


def _default_repo(repo_path: Path | None) -> str:
    if repo_path is None:
        return ""
    name = repo_path.name
    for suffix in (".tar.gz", ".tgz", ".tar", ".zip", ".bundle", ".git"):
        name = name.removesuffix(suffix)
    return name


def _check_unique(instances: list[SWEInstance], where: str) -> None:
    seen: set[str] = set()
    for instance in instances:
        if instance.instance_id in seen:
            raise ConfigError(
                f"{where}: instance_id",
                instance.instance_id,
                "appears more than once",
                "give every instance its own id",
            )
        seen.add(instance.instance_id)
