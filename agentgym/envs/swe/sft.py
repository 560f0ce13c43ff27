"""Gold trajectories of SWE-v0 tasks as tool-call conversations, for supervised fine-tuning.

::

    result = export_sft(out="swe-sft.jsonl")                   # the shipped tasks
    result = export_sft("mylib-swe-tasks/train.jsonl", out="mylib-sft.jsonl", sandbox="docker")
    result.exported, result.rejected                           # task ids; {task id: why}

Each task's gold patch is played through SWE-v0 as a model would play it, one assistant turn at
a time with the env's own tools: ``view`` the files the patch changes, apply the patch with
``edit`` / ``create`` / ``bash`` calls (``gold_tool_calls``), ``run_tests`` on the
``PASS_TO_PASS`` tests the checkout has (the first ``MAX_TESTS_RUN``), ``submit``. A task is
exported only when that episode scores 1 and every tool call succeeded; otherwise it is
rejected with the reason. The tool answers in the file are those SWE-v0 gave.

One JSON object per line, in the conversational format of TRL's ``SFTTrainer``:
``messages`` (the env's system and user messages, then assistant messages with OpenAI
``tool_calls`` and the ``tool`` messages that answered them, ending with the ``submit`` call)
and ``tools`` (the schemas SWE-v0 offers, as a JSON string, which ``SFTTrainer`` decodes), plus
``task_id``. Tool-call arguments are JSON strings, as in OpenAI's API: loaded with ``datasets``,
argument objects of different tools would be merged into one struct whose missing keys render
as ``null`` in the chat template.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.core.types import Message
from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.instances import SWEInstance, read_instances
from agentgym.envs.swe.patches import as_action, patch_to_tool_calls
from agentgym.envs.swe.repo import materialize
from agentgym.sandbox import SandboxChoice

__all__ = ["ExportResult", "GoldTrajectory", "export_sft", "gold_turns", "play_gold"]

_CHANGED = re.compile(r"^diff --git a/(\S+) b/\S+$", re.MULTILINE)
_PASSED = "(exit code 0)"
MAX_TESTS_RUN = 20
"""Most ``PASS_TO_PASS`` tests the gold episode runs before it submits (the first ones)."""


@dataclass(frozen=True)
class GoldTrajectory:
    """One task's gold episode: the conversation (what SFT trains on) and how it scored."""

    task_id: str
    messages: list[Message]
    tools: list[dict[str, Any]]
    reward: float
    problem: str | None = None
    """Why the episode is not gold (a failed tool call, the grade); None when it is."""

    def record(self) -> dict[str, Any]:
        """The JSONL record: ``task_id``, ``messages``, ``tools`` (a JSON string)."""
        return {"task_id": self.task_id, "messages": self.messages, "tools": json.dumps(self.tools)}


@dataclass(frozen=True)
class ExportResult:
    out: Path
    exported: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    """Task id -> why its gold episode did not score 1 (it is not in the file)."""


def gold_turns(instance: SWEInstance) -> list[Message]:
    """The assistant turns of ``instance``'s gold episode: view, patch, run tests, submit."""
    if not instance.patch:
        raise ConfigError(f"task {instance.instance_id!r}: patch", None, "is empty", "add it")
    with tempfile.TemporaryDirectory(prefix="agentgym-sft-") as tmp:
        root = materialize(instance, Path(tmp) / "repo")

        def read(path: str) -> str | None:
            file = root / path
            return file.read_bytes().decode("utf-8", "surrogateescape") if file.is_file() else None

        calls = patch_to_tool_calls(instance.patch, read)
        changed = [p for p in dict.fromkeys(_CHANGED.findall(instance.patch)) if read(p)]
        tests = [t for t in instance.pass_to_pass if _at_base(t, read)][:MAX_TESTS_RUN]
    turns = []
    if changed:
        views = [{"name": "view", "arguments": {"path": p}} for p in changed]
        turns.append(as_action(views, "I will read the code the report is about.", "call_view_"))
    turns.append(as_action(calls, "This change fixes the reported bug.", "call_fix_"))
    if tests:
        run = [{"name": "run_tests", "arguments": {"tests": tests}}]
        turns.append(as_action(run, "The existing tests should still pass.", "call_test_"))
    done = [{"name": "submit", "arguments": {}}]
    turns.append(as_action(done, "The fix is done.", "call_submit_"))
    return turns


def _at_base(test: str, read: Callable[[str], str | None]) -> bool:
    """Whether pytest node id ``test`` names a test the checkout has (its file defines each
    function and class of the id): a ``PASS_TO_PASS`` test may be one the test patch adds."""
    path, _, rest = test.partition("::")
    text = read(path) if rest else None
    if text is None:
        return False
    names = [name.split("[", 1)[0] for name in rest.split("::")]
    return all(
        re.search(rf"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+{re.escape(n)}\b", text, re.M)
        for n in names
    )


def play_gold(env: SWEEnv, instance: SWEInstance) -> GoldTrajectory:
    """Play ``instance``'s gold turns through ``env`` (an SWE-v0 whose tasks include it)."""
    turns = gold_turns(instance)  # before the sandbox: a task without a patch raises here
    observation, info = env.reset(options={"task_id": instance.task_id})
    messages: list[Message] = [dict(m) for m in observation]
    tools, reward, problem = list(info["tools"]), 0.0, None
    for turn in turns:
        messages.append(turn)
        observation, reward, terminated, truncated, info = env.step(turn)
        answers = [dict(m) for m in observation if m.get("role") == "tool"]
        problem = problem or _problem(turn, answers, info)
        if terminated or truncated:
            break
        messages.extend(answers)
    else:
        problem = problem or "the episode did not end with submit"
    if problem is None and reward != 1.0:
        problem = f"scored {reward:g} ({info.get('grade_reason')})"
    return GoldTrajectory(instance.task_id, messages, tools, float(reward), problem)


def _problem(
    turn: Message, answers: Sequence[Mapping[str, Any]], info: Mapping[str, Any]
) -> str | None:
    """Why a turn of a gold episode is not what a demonstration should show, or None."""
    if info.get("infra_error"):
        return f"the sandbox failed: {info.get('error', 'no error text')}"
    calls = turn.get("tool_calls") or []
    if len(answers) != len(calls):
        return f"{len(calls)} tool calls got {len(answers)} answers"
    for call, answer in zip(calls, answers, strict=True):
        name, text = call["function"]["name"], str(answer.get("content", ""))
        if text.startswith("Error"):
            return f"{name} failed: {text[:200]}"
        if name == "run_tests" and not text.rstrip().endswith(_PASSED):
            return f"run_tests before submitting did not pass: {text[-200:]}"
    return None


def export_sft(
    tasks: str | Path | Sequence[Mapping[str, Any]] | None = None,
    out: str | Path = "swe-sft.jsonl",
    *,
    sandbox: SandboxChoice = "auto",
    env_kwargs: Mapping[str, Any] | None = None,
) -> ExportResult:
    """Write the gold trajectory of every task of ``tasks`` (a JSONL path, dicts, or None: the
    shipped set) that scores 1 to the JSONL file ``out``; the others are in ``rejected``."""
    instances = read_instances(tasks)
    path = Path(out)
    result = ExportResult(path)
    env = SWEEnv(tasks=tasks, sandbox=sandbox, **dict(env_kwargs or {}))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as file:
            for instance in instances:
                try:
                    gold = play_gold(env, instance)
                except ConfigError as e:  # e.g. a task without a gold patch
                    result.rejected[instance.task_id] = str(e)
                    continue
                if gold.problem is not None:
                    result.rejected[instance.task_id] = gold.problem
                    continue
                file.write(json.dumps(gold.record(), ensure_ascii=False) + "\n")
                result.exported.append(instance.task_id)
    finally:
        env.close()
    return result
