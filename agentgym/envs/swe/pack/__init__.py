"""``agentgym/SWE-Pack-v0``: SWE tasks synthesized from real open-source Python repositories.

The pack ships in ``data/<repository>/``: the upstream ``LICENSE``, ``source.bundle`` (the
trimmed upstream tree at a pinned commit, one commit), ``tasks.bundle`` (each task's buggy tree
as a root commit of its own, on a branch named after the task), ``tasks.jsonl.gz`` (the
SWE-bench-style records) and ``build.json`` (how they were made); ``data/NOTICE`` names each
repository's upstream, commit and licence. ``scripts/build_swe_pack.py`` rebuilds and grows it.

A checkout of a task holds only what its ``base_commit`` reaches (``repo.materialize``): the
other tasks' trees in the same bundle, which hold this task's function unbroken, never reach the
agent.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.envs.swe.env import SWEEnv

__all__ = ["PACK_DIR", "SPLITS", "SWEPackEnv", "load_pack", "pack_repos"]

PACK_DIR = Path(__file__).parent / "data"
"""One folder per repository, each with ``tasks.jsonl.gz`` and ``tasks.bundle``."""
TASKS_FILE = "tasks.jsonl.gz"
SPLITS = ("train", "test")


def pack_repos(root: Path = PACK_DIR) -> tuple[str, ...]:
    """The repositories of the pack that hold tasks, sorted."""
    if not root.is_dir():
        return ()
    return tuple(sorted(p.name for p in root.iterdir() if (p / TASKS_FILE).is_file()))


def load_pack(
    repos: Sequence[str] | None = None, split: str | None = None, *, root: Path = PACK_DIR
) -> list[dict[str, Any]]:
    """The pack's tasks as SWE-bench-style dicts (``repo_path`` absolute), in a fixed order.

    Args:
        repos: repository names (``pack_repos()``); ``None`` for all of them.
        split: ``"train"`` or ``"test"`` (every task of one source file is on one side);
            ``None`` for both.

    Raises ``ConfigError`` naming an unknown repository or split, or an empty selection.
    """
    available = pack_repos(root)
    if not available:
        raise ConfigError(
            "pack", str(root), "holds no task", "reinstall agentgym, or rebuild the pack"
        )
    if split is not None and split not in SPLITS:
        raise ConfigError("split", split, "is not a split of the pack", "pass 'train' or 'test'")
    if isinstance(repos, str):
        repos = [repos]
    chosen = available if repos is None else tuple(repos)
    unknown = [name for name in chosen if name not in available]
    if unknown or not chosen:
        raise ConfigError(
            "repos",
            repos,
            f"names no repository of the pack ({', '.join(unknown) or 'empty'})",
            f"pass some of {list(available)}, or None for all",
        )
    tasks: list[dict[str, Any]] = []
    for name in dict.fromkeys(chosen):
        folder = root / name
        with gzip.open(folder / TASKS_FILE, "rt", encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
        for record in records:
            if split is None or record.get("split") == split:
                tasks.append({**record, "repo_path": str(folder / record["repo_path"])})
    if not tasks:
        raise ConfigError(
            "split", split, f"holds no task of {list(chosen)}", "pass split=None, or other repos"
        )
    return tasks


class SWEPackEnv(SWEEnv):
    """Fix a bug injected into a real open-source Python project; graded by its own tests.

    Description:
        ``agentgym/SWE-v0`` (``SWEEnv``) on the task pack: bugs injected into the functions of
        real, permissively licensed pure-Python projects (toolz, boltons, cachetools,
        tabulate, jmespath, parse; see ``data/NOTICE``) by ``agentgym swe synth``, each kept
        only when it makes at least one of the project's own tests fail and leaves others
        passing, and when the fix makes them pass again. The problem statement is a bug report
        written from the failing tests. Its own id, not an argument of SWE-v0: the tasks, their
        difficulty and the statements' style differ from SWE-v0's hand-written set, so scores
        on the two are not comparable. ``reset(seed=s)`` draws a task; ``options={"task_id":
        id}`` pins one (an int picks by index).

    Observation:
        As SWE-v0: a system message and the problem statement on reset; tool messages (or a
        user message without a tool call) on each step; the verdict on the last.

    Action:
        As SWE-v0: text with tool calls in the ``tool_parser`` format, or an assistant message
        with structured ``tool_calls``.

    Tools:
        As SWE-v0: ``view``, ``search``, ``edit``, ``create``, ``bash``, ``run_tests``,
        ``submit``.

    Reward:
        As SWE-v0: 1.0 when every ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` test (at most 200 per
        task) passes after grading, else 0.0, on the last step; a tampering diff scores 0.0.
        ``info["reward_components"]`` is ``{"resolved": reward}``.

    Episode end:
        As SWE-v0: terminated by ``submit``, truncated after ``max_turns`` turns and graded; a
        sandbox failure ends the episode with ``info["infra_error"]`` True.

    Sandbox: what is isolated and what is not:
        As SWE-v0 (its docstring says what each backend isolates). The checkout holds one
        commit, the buggy tree: neither the upstream history nor the other tasks' trees.

    Arguments:
        repos: repository names to draw tasks from (``pack_repos()``); ``None``: all.
        split: ``"train"`` or ``"test"`` (split by source file, so no test task shares a
            function's file with a train task); ``None``: both.
        Every other keyword argument is SWE-v0's (``sandbox``, ``max_turns``, ...), except
        ``tasks``: pass your own tasks to ``agentgym/SWE-v0``.

    Step info keys: ``task_id``, ``turn``, ``submitted``, ``infra_error``, ``reward_components``;
    on the last step also ``success``, ``resolved``, ``grade_reason``, ``agent_diff``,
    ``graded_diff``, ``dropped_files``, ``tests``, ``test_output``, ``tampering`` and, when
    truncated, ``truncation_reason``.
    Reset info keys: ``tools``, ``task_id``, ``repo``, ``base_commit``, ``backend``,
    ``max_turns``, ``infra_error``.

    Version history:
        v0: first version (six repositories).
    """

    def __init__(
        self,
        *,
        repos: Sequence[str] | None = None,
        split: str | None = None,
        **kwargs: Any,
    ) -> None:
        for name in ("tasks", "instances"):
            if kwargs.get(name) is not None:
                raise ConfigError(
                    name,
                    "...",
                    "is not an argument of agentgym/SWE-Pack-v0 (its tasks are the pack's)",
                    "choose tasks with repos=/split=, or pass your own to agentgym/SWE-v0",
                )
        super().__init__(tasks=load_pack(repos, split), **kwargs)
