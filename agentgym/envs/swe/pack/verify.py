"""Grade a pack task's gold patch and the empty patch through SWE-v0, and check its checkout.

``check_task(env, task_id)`` plays three episodes' worth of work on ``env`` (an ``SWEEnv``):
it looks at the checkout's git history with the ``bash`` tool (exactly one commit, the base,
and not the fixed file's blob), applies the gold patch with the env's own ``edit`` / ``create``
tools and submits (must score 1), then submits no change (must score 0).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.patches import as_action, gold_tool_calls

__all__ = ["TaskCheck", "check_task", "fixed_blobs"]

_INDEX = re.compile(r"^index ([0-9a-f]{7,64})\.\.([0-9a-f]{7,64})", re.MULTILINE)


@dataclass
class TaskCheck:
    """What ``check_task`` found for one task."""

    task_id: str
    gold: float
    no_op: float
    commits: list[str]
    """``git rev-list --all`` in the agent's checkout: the base commit only."""
    leaked_blobs: list[str]
    """Blobs of the fixed files that the agent's checkout holds (none)."""
    seconds: float
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def fixed_blobs(patch: str) -> list[str]:
    """The blob ids of the files as the gold patch leaves them (its ``index a..b`` lines)."""
    return [after for _, after in _INDEX.findall(patch) if set(after) != {"0"}]


def _bash(env: SWEEnv, command: str) -> str:
    obs, *_ = env.step(as_action([{"name": "bash", "arguments": {"command": command}}]))
    return str(obs[0]["content"])


def _submit(env: SWEEnv) -> tuple[float, dict[str, Any]]:
    _, reward, terminated, _, info = env.step(as_action([{"name": "submit", "arguments": {}}]))
    return float(reward) if terminated else float("nan"), info


def check_task(env: SWEEnv, task_id: str) -> TaskCheck:
    """Check one task of ``env``; ``TaskCheck.problems`` says what is wrong (empty: nothing)."""
    started = time.monotonic()
    instance = next(i for i in env.instances if i.instance_id == task_id)
    problems: list[str] = []
    _, info = env.reset(options={"task_id": task_id})
    if info["infra_error"]:
        problems.append("no sandbox for the episode")
    blobs = fixed_blobs(instance.patch or "")
    probe = "git rev-list --all; " + "".join(
        f"git cat-file -e {blob} 2>/dev/null && echo LEAK {blob}; " for blob in blobs
    )
    answer = _bash(env, probe)
    commits = re.findall(r"^[0-9a-f]{40}$", answer, re.MULTILINE)
    leaked = re.findall(r"^LEAK (\S+)$", answer, re.MULTILINE)
    if commits != [instance.base_commit]:
        problems.append(f"the checkout holds commits {commits}, not only the base")
    if leaked or not blobs:
        problems.append(f"the checkout holds the fixed blobs {leaked}" if leaked else "no blob")
    env.step(as_action(gold_tool_calls(instance)))
    gold, gold_info = _submit(env)
    if gold != 1.0:
        problems.append(f"gold scored {gold} ({gold_info.get('grade_reason')})")
    env.reset(options={"task_id": task_id})
    no_op, no_op_info = _submit(env)
    if no_op != 0.0 or no_op_info.get("grade_reason") != "tests_failed":
        problems.append(f"no change scored {no_op} ({no_op_info.get('grade_reason')})")
    return TaskCheck(task_id, gold, no_op, commits, leaked, time.monotonic() - started, problems)
