"""``MathEnv``: answer a math question in ``\\boxed{}``; optionally with a sandboxed Python tool."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from agentgym.core.deprecation import renamed_argument
from agentgym.core.env import AgentEnv, StepResult
from agentgym.core.errors import ConfigError, SandboxError
from agentgym.core.parsing import call_format
from agentgym.core.tools import Tool, clip
from agentgym.core.types import Action, Observation, system, user
from agentgym.envs.math.grading import Verdict, grade, require_math_verify
from agentgym.envs.math.tasks import (
    DEFAULT_GENERATORS,
    AnswerFormat,
    MathTask,
    generate_tasks,
    load_file,
)
from agentgym.envs.tasks import choose_task
from agentgym.envs.validate import choice, integer, seconds
from agentgym.sandbox import (
    Sandbox,
    SandboxChoice,
    check_sandbox,
    open_sandbox,
    resolve_sandbox,
)

__all__ = ["MathEnv"]

RULES = (
    "Solve the problem. Reason step by step, then give your final answer in \\boxed{}, e.g. "
    "\\boxed{42}. Only the last \\boxed{} is graded; boxing several different answers scores 0."
)
TOOL_RULES = (
    " You may run Python 3 code with the `python` tool (no network; print what you need to "
    "see); answer in text without a tool call when you are done."
)
_VERDICTS = {
    "correct": "Correct.",
    "wrong": "Incorrect.",
    "no_boxed_answer": "No \\boxed{} answer found: it counts as wrong.",
    "several_boxed_answers": "Several different \\boxed{} answers: it counts as wrong.",
    "too_long": "The boxed answer is too long: it counts as wrong.",
    "grader_timeout": "The answer could not be checked in time: it counts as wrong.",
}


@dataclass
class _Episode:
    task: MathTask
    turns: int = 0
    infra_error: bool = False


class MathEnv(AgentEnv):
    """Answer a math question; the last ``\\boxed{}`` answer is checked with ``math-verify``.

    Description:
        Tasks come from ``reasoning-gym`` generators, offline (default: a mix of arithmetic,
        chain sums, GSM-style word problems, fraction simplification, linear equations, LCM and
        GCD; ``generators`` picks others and their difficulty), or from local data (``tasks``):
        a JSONL / Parquet file or a local Hugging Face dataset directory, in row order, with
        GSM8K (``#### 72``) and MATH (``\\boxed{}`` in the solution) answers read as
        ``agentgym.envs.math.tasks`` documents. Nothing is downloaded. ``reset(seed=s)`` draws
        a task from ``np_random``; ``options={"task_id": i}`` pins the i-th (or an id string
        such as ``"gcd/6"``).

    Observation:
        On reset, a system message with the answer rules (and the tool, when on) and a user
        message with the question. A final step adds one user message with the verdict
        (``Correct.`` / ``Incorrect.`` / why the answer was not read); a tool step adds one tool
        message per call with the program's stdout, stderr and exit status.

    Action:
        Text (or an assistant message) ending in ``\\boxed{answer}``. With ``python_tool``, a
        turn that holds tool calls runs them and the episode goes on; a turn without calls is
        the final answer.

    Tools:
        ``python(code: str)`` when ``python_tool=True``: runs ``code`` as a Python 3 script in
        a sandbox (bubblewrap, else Docker, by default); files persist within an episode.

    Reward:
        1.0 when the last boxed answer equals the reference, else 0.0 (the rule, including the
        hedging and spam cases that score 0, is in ``agentgym.envs.math.grading``).
        ``info["reward_components"]`` is ``{"correct": reward}``.

    Episode end:
        Terminated by the final answer. With the tool, truncated after ``max_turns`` turns
        (``info["truncation_reason"] == "max_turns"``, reward 0). A sandbox failure sets
        ``info["infra_error"]``. Stepping an ended episode raises ``EnvStateError``.

    Sandbox: what is isolated and what is not:
        Tool code runs in ``agentgym.sandbox`` (see ``LocalSandbox`` and ``DockerSandbox``): no
        network, a private work dir reset between episodes, rlimits and a timeout per run, and
        never unisolated unless asked for by name. With ``python_tool``, ``sandbox="auto"``
        takes bubblewrap where it runs, else Docker where a local daemon answers and holds
        agentgym's image; with neither, the constructor raises ``SandboxUnavailable`` naming
        the fixes (install bubblewrap, start Docker and build the image, or pass
        ``sandbox="unsafe-local"``: plain processes that can read and write the user's files
        and use the network, with a ``SandboxIsolationWarning`` once per process). Without the
        tool no model code runs and no sandbox is needed. The grader runs in this process and
        never executes model text.

    Arguments:
        tasks: ``None`` for reasoning-gym tasks, a ``.jsonl`` / ``.parquet`` path, or a local
            Hugging Face dataset directory: one written by ``Dataset.save_to_disk`` /
            ``DatasetDict.save_to_disk``, or a Hub snapshot of split-named ``.parquet`` /
            ``.jsonl`` files (e.g. GSM8K's ``main/test-00000-of-00001.parquet``; pass the
            config's folder when there are several). Rules: ``agentgym.envs.math.sources``.
        split: the split of a ``DatasetDict`` or snapshot directory; ``None`` (default) takes
            ``"test"`` if there is one, else ``"train"``. Only with a directory ``tasks``.
        question_key, answer_key: the file's columns (MATH: ``"problem"``, ``"solution"``).
        answer_format: ``"auto"``, ``"plain"``, ``"gsm8k"`` or ``"math"``.
        generators: reasoning-gym name -> config overrides (difficulty), e.g.
            ``{"basic_arithmetic": {"max_terms": 3}}``; ``None`` for the default mix.
        size: number of generated tasks. data_seed: seed of the generators.
        python_tool: give the model the ``python`` tool (multi-turn).
        sandbox: for the tool: ``"auto"`` (bubblewrap, else Docker, else
            ``SandboxUnavailable``), ``"local"`` (bubblewrap or refuse), ``"docker"`` or
            ``"unsafe-local"`` (no isolation, on your own responsibility).
        python_timeout: seconds per tool run. max_turns: turns with the tool (default 8).
        grade_timeout: seconds math-verify may take per answer.
        tool_parser: parser for tool calls written as text. render_mode: ``"ansi"``/``"human"``.
        data: the old name of ``tasks`` (a deprecation warning).

    Step info keys: ``task_id``, ``turn``, ``success``, ``answer``, ``reference``, ``reason``
    (a ``Verdict`` reason, ``"tool_call"`` or ``"max_turns"``), ``grade_detail`` (why a wrong
    answer is wrong on a graded step, e.g. the values a hedging box states), ``infra_error``,
    ``reward_components``, and ``truncation_reason`` when truncated.
    Reset info keys: ``tools``, ``task_id``.

    Version history:
        v0: first version. Before the first release, a box that hedges between values (by any
        notation) became wrong; equal forms of the reference still score 1. With the python
        tool the system message says how to write a tool call in text
        (``agentgym.core.parsing.call_format``); wording only, no bump. ``data`` renamed
        ``tasks``, as in every family (the old name still works); no bump.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        *,
        tasks: str | None = None,
        question_key: str = "question",
        answer_key: str = "answer",
        answer_format: AnswerFormat = "auto",
        split: str | None = None,
        generators: Mapping[str, Mapping[str, Any]] | None = None,
        size: int = 1000,
        data_seed: int = 0,
        python_tool: bool = False,
        sandbox: SandboxChoice = "auto",
        python_timeout: float = 10.0,
        max_turns: int | None = None,
        grade_timeout: float = 10.0,
        tool_parser: str = "hermes",
        render_mode: str | None = None,
        data: str | None = None,
    ) -> None:
        require_math_verify()
        tasks = renamed_argument("data", data, "tasks", tasks)
        if not isinstance(python_tool, bool):
            raise ConfigError("python_tool", python_tool, "must be a bool", "pass True or False")
        check_sandbox(sandbox)
        choice("answer_format", answer_format, ("auto", "plain", "gsm8k", "math"))
        self.python_timeout = seconds("python_timeout", python_timeout)
        self.grade_timeout = seconds("grade_timeout", grade_timeout)
        tools = (Tool.from_function(self._python, name="python"),) if python_tool else ()
        super().__init__(
            tools=tools,
            tool_parser=tool_parser,
            tool_timeout=self.python_timeout + 60,  # the sandbox's own timeout comes first
            render_mode=render_mode,
        )
        # Only the tool runs model code: Math-v0 needs no sandbox and refuses nothing.
        self.python_tool = python_tool
        self.backend = resolve_sandbox(sandbox) if python_tool else sandbox
        default_turns = 8 if python_tool else 1
        self.max_turns = integer("max_turns", default_turns if max_turns is None else max_turns)
        if tasks is not None:
            self.tasks = load_file(tasks, question_key, answer_key, answer_format, split)
        elif split is not None:
            raise ConfigError("split", split, "applies only to a data directory", "drop split=")
        else:
            mix = DEFAULT_GENERATORS if generators is None else generators
            self.tasks = generate_tasks(
                mix, integer("size", size), integer("data_seed", data_seed, 0)
            )
        self._by_id = {task.task_id: task for task in self.tasks}
        self._sandbox: Sandbox | None = None
        self._episode: _Episode | None = None

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        task = self._choose_task(options)
        self._episode = _Episode(task)
        await self._reset_sandbox()
        rules = RULES + (
            f"{TOOL_RULES} {call_format(self.tool_parser)}" if self.python_tool else ""
        )
        return (system(rules), user(task.question)), {
            "tools": self.tool_schemas(),
            "task_id": task.task_id,
        }

    async def astep(self, action: Action) -> StepResult:
        episode = self._episode
        assert episode is not None  # AgentEnv refuses a step before a reset
        episode.turns += 1
        parsed = self.parse(action)
        if self.python_tool and parsed.has_calls:
            messages = await self.run_tool_calls(parsed)
            truncated = episode.turns >= self.max_turns
            reason = "max_turns" if truncated else "tool_call"
            info = self._info(episode, Verdict(False, None, reason))
            info["invalid_action"] = self.tool_report.invalid_action(parsed)
            info["timed_out"] = bool(self.tool_report.timed_out)
            if truncated:
                info["truncation_reason"] = "max_turns"
            return messages, 0.0, episode.infra_error, truncated, info
        verdict = await grade(
            parsed.content,
            episode.task.answer,
            exact=episode.task.exact,
            timeout=self.grade_timeout,
        )
        reward = 1.0 if verdict.correct else 0.0
        return (user(_VERDICTS[verdict.reason]),), reward, True, False, self._info(episode, verdict)

    async def aclose(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        try:
            if sandbox is not None:
                await sandbox.close()
        finally:
            await super().aclose()

    # --- internals --------------------------------------------------------------------------

    def _choose_task(self, options: dict[str, Any] | None) -> MathTask:
        return choose_task(self.tasks, self._by_id, options, self.np_random)

    async def _reset_sandbox(self) -> None:
        if self._sandbox is None:
            return
        try:
            await self._sandbox.reset()
        except SandboxError:  # start afresh at the next tool call
            sandbox, self._sandbox = self._sandbox, None
            await _close_quietly(sandbox)

    async def _python(self, code: str) -> str:
        """Run Python 3 code in a sandbox and return its stdout, stderr and exit status.

        Args:
            code: a complete Python 3 script; use print() to show results.
        """
        try:
            if self._sandbox is None:
                self._sandbox = await open_sandbox(self.backend)
            await self._sandbox.write_file("main.py", code)
            run = await self._sandbox.run(["python3", "main.py"], timeout=self.python_timeout)
        except SandboxError as e:
            if self._episode is not None:
                self._episode.infra_error = True
            return f"Error: the sandbox failed (not your fault): {clip(str(e), 200)}"
        parts = [f"stdout:\n{clip(run.stdout, 4000)}"] if run.stdout else []
        if run.stderr:
            parts.append(f"stderr:\n{clip(run.stderr, 2000)}")
        if run.timed_out:
            self.tool_report.note_timeout()  # the model's own loop: scored, never dropped
        status = "timed out" if run.timed_out else f"exit code {run.exit_code}"
        return "\n".join([*parts, f"({status})"])

    def _info(self, episode: _Episode, verdict: Verdict) -> dict[str, Any]:
        reward = 1.0 if verdict.correct else 0.0
        return {
            "task_id": episode.task.task_id,
            "turn": episode.turns,
            "success": verdict.correct,
            "answer": verdict.answer,
            "reference": episode.task.answer,
            "reason": verdict.reason,
            "grade_detail": verdict.detail,
            "invalid_action": verdict.reason == "no_boxed_answer",  # no answer to grade
            "timed_out": verdict.reason == "grader_timeout",  # the answer outran the grader
            "infra_error": episode.infra_error,
            "reward_components": {"correct": reward},
        }


async def _close_quietly(sandbox: Sandbox) -> None:
    with contextlib.suppress(SandboxError):
        await sandbox.close()
