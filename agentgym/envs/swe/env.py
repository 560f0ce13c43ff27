"""``SWEEnv``: fix a reported bug in a real repository with file and shell tools."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agentgym.core.aio import deadline
from agentgym.core.deprecation import renamed_argument
from agentgym.core.env import AgentEnv, StepResult, ToolReport
from agentgym.core.errors import ConfigError, InfraError
from agentgym.core.types import Action, Observation, system, user
from agentgym.envs.swe.backends import SWEBackend, make_backend
from agentgym.envs.swe.grader import GradeResult, agent_diff, grade
from agentgym.envs.swe.instances import SWEInstance, read_instances
from agentgym.envs.swe.text import NO_TOOL_CALL, SANDBOX_FAILED, system_prompt, verdict
from agentgym.envs.swe.tools import RepoTools
from agentgym.envs.tasks import choose_task
from agentgym.envs.validate import integer, seconds
from agentgym.sandbox import Sandbox, SandboxChoice, check_sandbox

__all__ = ["SWEEnv"]

log = logging.getLogger(__name__)


@dataclass
class _Episode:
    instance: SWEInstance
    sandbox: Sandbox | None
    infra_error: str | None = None
    turns: int = 0


class SWEEnv(AgentEnv):
    """Fix a reported bug in a Python repository; graded by the project's own tests.

    Description:
        Each task (an "instance", SWE-bench style) is a git repository at the commit where a
        bug was reported, the report, a ``test_patch`` adding the tests that check the fix, and
        the ids of the tests that must pass after it (``FAIL_TO_PASS``, failing before) and
        keep passing (``PASS_TO_PASS``). The shipped set (``agentgym/envs/swe/data``: small
        pure-Python projects, offline) is the default; ``tasks`` takes your own SWE-bench,
        SWE-Gym or R2E-Gym style JSONL (``agentgym.envs.swe.instances`` lists the fields).
        ``reset(seed=s)`` draws an instance from ``np_random``; ``options={"task_id": id}`` pins
        one (an int picks by index).

    Observation:
        On reset, a short system message (the repository is every tool's working directory;
        what is graded; how to write a tool call in the ``tool_parser`` format) and a user
        message holding the problem statement, verbatim. Each step adds one tool message per
        tool call, or a user message when the turn had no tool call; the last step adds a user
        message with the verdict (after ``submit``, whose answer is ``Submitted.``, what grading
        found).

    Action:
        Text with tool calls in the ``tool_parser`` format (``hermes`` by default), or an
        assistant message with structured ``tool_calls``. Calls of a turn run in order.

    Tools:
        ``view(path, start_line, end_line)`` a file with line numbers, or a directory listing;
        ``search(pattern, path, regex)`` grep -rn, at most 200 matches; ``edit(path, old_str,
        new_str)`` replaces the one exact occurrence of ``old_str`` (none or several is an
        error naming the lines); ``create(path, content, overwrite)`` writes a new file
        (refuses an existing one unless ``overwrite``); ``bash(command)`` a fresh bash in the
        repository with ``command_timeout``; ``run_tests(tests)`` pytest on files / node ids
        with ``test_timeout``; ``submit()`` ends the episode. Output is cut to
        ``max_output_chars`` keeping its start and end; errors and timeouts are results.

    Reward:
        1.0 when every ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` test passes after grading, else
        0.0, given on the last step. Grading (``agentgym.envs.swe.grader``) takes the agent's
        diff against ``base_commit`` (new files included), drops changes to tests, conftest.py
        files and pytest configuration, applies it and ``test_patch`` in a fresh sandbox and
        runs the tests; a skipped, erroring or missing test counts as failed. A diff that
        tampers with the interpreter or the test runner scores 0.0 whatever the tests say:
        found by the scan of the diff (then the tests do not run), by the runner's checks of the
        test machinery, or by the grader's always-failing canary tests reported as passing;
        ``info["tampering"]`` lists the findings and ``info["grade_reason"]`` is
        ``"tampering"``. ``info["reward_components"]`` is ``{"resolved": reward}``.

    Episode end:
        Terminated by ``submit``; truncated after ``max_turns`` turns
        (``info["truncation_reason"] == "max_turns"``), and graded all the same. A sandbox
        failure ends the episode with reward 0 and ``info["infra_error"]`` True: drop the
        sample. A step cancelled midway (a vector env's ``step_timeout``, ``asyncio.wait_for``)
        ends the episode there and gives its sandbox back at once, stopping what ran in it.
        Stepping an ended episode raises ``EnvStateError``; ``reset()`` starts a new one.

    Sandbox: what is isolated and what is not:
        Each episode gets a sandbox of its own from the backend: ``"docker"`` (a container per
        episode from the instance's image) or ``"local"`` (``LocalSandbox``: bubblewrap, no
        network, read-only ``/usr``, a private work dir and ``/tmp``, rlimits, every process
        killed at the end of its command). The repository in it holds no history past
        ``base_commit``. Grading happens in a second, fresh sandbox, so nothing the agent
        left running or wrote outside the repository reaches it; only its diff does, minus the
        protected paths. Not isolated: the graded tests import the agent's code into the
        process that runs them. Outcomes are decided by a supervisor process outside it, with
        canary tests and checks of the test machinery, after a scan of the diff; code written
        against this grader in particular may still forge a pass (the grader's docstring says
        what each layer stops and what none does). See the sandbox backends for what their
        isolation leaves out. The agent's commands never run unisolated unless asked for by
        name: ``sandbox="auto"`` takes ``"local"`` where bubblewrap runs (and the host has git
        and pytest), else ``"docker"`` where a local daemon answers and holds agentgym's image;
        with neither, the constructor raises ``SandboxUnavailable`` naming the fixes (install
        bubblewrap, start Docker and build the image, or pass ``sandbox="unsafe-local"``: plain
        processes that can read and write the user's files and use the network, with a
        ``SandboxIsolationWarning`` once per process).

    Arguments:
        tasks: a JSONL path or a list of SWE-bench-style dicts; ``None`` for the shipped set.
        sandbox: ``"auto"`` (bubblewrap, else Docker, else ``SandboxUnavailable``),
            ``"local"`` (bubblewrap or refuse), ``"docker"`` or ``"unsafe-local"`` (no
            isolation, on your own responsibility).
        backend: a ready ``SWEBackend`` to share between envs (the env does not close it);
            overrides ``sandbox``.
        backend_options: keyword arguments of the backend (e.g. ``{"limits": Limits(...)}``).
        max_turns: turns before the episode is truncated and graded.
        command_timeout: seconds a ``bash`` / ``view`` / ``search`` / ``edit`` / ``create``
            call may run.
        test_timeout: seconds ``run_tests`` and the graded test run may take.
        setup_timeout: seconds to get an episode's or a grading run's sandbox ready.
        max_output_chars: characters of a tool answer.
        max_diff_bytes: largest diff graded; a larger one scores 0.
        tool_parser: parser of tool calls written as text. render_mode: ``"ansi"`` / ``"human"``.
        instances: the old name of ``tasks`` (a deprecation warning).

    Step info keys: ``task_id``, ``turn``, ``submitted``, ``infra_error``, ``reward_components``;
    on the last step also ``success`` (as ``resolved``), ``resolved``, ``grade_reason``,
    ``agent_diff``, ``graded_diff``, ``dropped_files`` (path -> why), ``tests``
    (``{"FAIL_TO_PASS": {id: outcome}, "PASS_TO_PASS": ...}``), ``test_output``, ``tampering``
    (a list of findings, each a sentence naming the file, line or check; empty when none) and,
    when truncated, ``truncation_reason``.
    Reset info keys: ``tools``, ``task_id``, ``repo``, ``base_commit``, ``backend``,
    ``max_turns``, ``infra_error``.

    Version history:
        v0: first version. Before the first release, a graded diff that tampers with the
        interpreter or the test runner became a 0 (``info["tampering"]``); gold patches of the
        shipped tasks still score 1. The system message says how to write a tool call in text
        (``agentgym.core.parsing.call_format``), and the verdict after ``submit`` no longer
        repeats ``Submitted.``; wording only, no bump. ``instances`` renamed ``tasks``, as in
        every family (the old name still works); no bump.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        *,
        tasks: str | Path | Sequence[Mapping[str, Any]] | None = None,
        sandbox: SandboxChoice = "auto",
        backend: SWEBackend | None = None,
        backend_options: Mapping[str, Any] | None = None,
        max_turns: int = 50,
        command_timeout: float = 60.0,
        test_timeout: float = 300.0,
        setup_timeout: float = 600.0,
        max_output_chars: int = 10_000,
        max_diff_bytes: int = 1 << 20,
        tool_parser: str = "hermes",
        render_mode: str | None = None,
        instances: str | Path | Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        tasks = renamed_argument("instances", instances, "tasks", tasks)
        check_sandbox(sandbox)
        self.command_timeout = seconds("command_timeout", command_timeout)
        self.test_timeout = seconds("test_timeout", test_timeout)
        self.setup_timeout = seconds("setup_timeout", setup_timeout)
        self.max_turns = integer("max_turns", max_turns, 1)
        self.max_diff_bytes = integer("max_diff_bytes", max_diff_bytes, 1024)
        output = integer("max_output_chars", max_output_chars, 1000)
        self._tools = RepoTools(
            command_timeout=self.command_timeout, test_timeout=self.test_timeout, max_output=output
        )
        super().__init__(
            tools=self._tools.tools(),
            tool_parser=tool_parser,
            tool_timeout=max(self.command_timeout, self.test_timeout) + 60,  # sandbox's first
            render_mode=render_mode,
        )
        self.instances = read_instances(tasks)
        self._by_id = {instance.instance_id: instance for instance in self.instances}
        if backend_options is not None and not isinstance(backend_options, Mapping):
            raise ConfigError("backend_options", backend_options, "must be a dict", "pass {}")
        if backend is not None and not isinstance(backend, SWEBackend):
            raise ConfigError("backend", backend, "is not an SWEBackend", "pass make_backend()")
        self._owns_backend = backend is None
        self.backend = backend or make_backend(sandbox, **dict(backend_options or {}))
        self._episode: _Episode | None = None

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        await self._end_episode()
        self._episode = None  # a reset cancelled below leaves no half-ended episode to step
        instance = choose_task(self.instances, self._by_id, options, self.np_random)
        sandbox, error = None, None
        try:
            async with deadline(self.setup_timeout, f"preparing the sandbox of {instance.task_id}"):
                sandbox = await self.backend.acquire(instance)
        except InfraError as e:
            error = f"{type(e).__name__}: {e}"
            log.warning("SWE episode of %s has no sandbox: %s", instance.instance_id, error)
        self._episode = _Episode(instance, sandbox, infra_error=error)
        self._tools.start(sandbox)
        info = {
            "tools": self.tool_schemas(),
            "task_id": instance.instance_id,
            "repo": instance.repo,
            "base_commit": instance.base_commit,
            "backend": self.backend.name,
            "max_turns": self.max_turns,
            "infra_error": error is not None,
        }
        return (system(system_prompt(self.tool_parser)), user(instance.problem_statement)), info

    async def astep(self, action: Action) -> StepResult:
        episode = self._episode
        assert episode is not None  # AgentEnv refuses a step before a reset
        try:
            return await self._step(episode, action)
        except (Exception, asyncio.CancelledError):
            # Cancelled (a step deadline) or failed midway: whatever the step started may still
            # run in the sandbox. End the episode and give the sandbox back now rather than at
            # the next reset; shielded, so a second cancellation cannot leave it half released.
            # (AgentEnv ends the episode: the next step raises EnvStateError.)
            await asyncio.shield(self._end_episode())
            raise

    async def _step(self, episode: _Episode, action: Action) -> StepResult:
        episode.turns += 1
        messages: tuple[Any, ...] = (user(SANDBOX_FAILED),)
        invalid = timed_out = False
        if episode.infra_error is None:
            parsed = self.parse(action)
            calls = parsed.has_calls
            timeouts = self._tools.timeouts
            self.tool_report = ToolReport()
            messages = await self.run_tool_calls(parsed) if calls else (user(NO_TOOL_CALL),)
            episode.infra_error = self._tools.infra_error
            invalid = self.tool_report.invalid_action(parsed)
            timed_out = bool(self.tool_report.timed_out) or self._tools.timeouts > timeouts
        info = self._info(episode)
        info.update(invalid_action=invalid, timed_out=timed_out)
        if episode.infra_error is not None:
            await self._end_episode()
            return messages, 0.0, True, False, info
        submitted = self._tools.submitted
        if not submitted and episode.turns < self.max_turns:
            return messages, 0.0, False, False, info
        result = await self._grade(episode)
        info.update(_grade_info(result))
        if not submitted:
            info["truncation_reason"] = "max_turns"
        messages = (*messages, user(verdict(result, submitted)))
        return messages, result.reward, submitted, not submitted, info

    async def aclose(self) -> None:
        try:
            await self._end_episode()
            if self._owns_backend:
                await self.backend.aclose()
        finally:
            await super().aclose()

    # --- internals --------------------------------------------------------------------------

    async def _grade(self, episode: _Episode) -> GradeResult:
        """Grade the episode's work tree; its sandbox is released on the way."""
        try:
            async with deadline(self.test_timeout + 2 * self.setup_timeout, "grading"):
                if episode.sandbox is None:
                    raise InfraError("the episode's sandbox is gone")
                diff, why = await agent_diff(
                    episode.sandbox, episode.instance, max_bytes=self.max_diff_bytes
                )
                await self._end_episode()
                if diff is None:
                    return GradeResult(0.0, why.split(":", 1)[0], test_output=why)
                return await grade(
                    self.backend,
                    episode.instance,
                    diff,
                    test_timeout=self.test_timeout,
                    max_bytes=self.max_diff_bytes,
                )
        except InfraError as e:
            episode.infra_error = f"{type(e).__name__}: {e}"
            log.warning("grading %s failed: %s", episode.instance.instance_id, episode.infra_error)
            return GradeResult(0.0, "infra_error", infra_error=episode.infra_error)
        finally:
            await self._end_episode()

    async def _end_episode(self) -> None:
        """Give the episode's sandbox back (once)."""
        episode = self._episode
        sandbox = episode.sandbox if episode is not None else None
        if episode is None or sandbox is None:
            return
        episode.sandbox = None
        self._tools.sandbox = None
        with contextlib.suppress(InfraError):
            await self.backend.release(sandbox)

    def _info(self, episode: _Episode) -> dict[str, Any]:
        return {
            "task_id": episode.instance.instance_id,
            "turn": episode.turns,
            "submitted": self._tools.submitted,
            "infra_error": episode.infra_error is not None,
            "reward_components": {"resolved": 0.0},
        }


def _grade_info(result: GradeResult) -> dict[str, Any]:
    return {
        "success": result.resolved,
        "resolved": result.resolved,
        "grade_reason": result.reason,
        "agent_diff": result.agent_diff,
        "graded_diff": result.graded_diff,
        "dropped_files": dict(result.dropped),
        "tests": {"FAIL_TO_PASS": result.fail_to_pass, "PASS_TO_PASS": result.pass_to_pass},
        "test_output": result.test_output,
        "tampering": list(result.tampering),
        "timed_out": result.timed_out,
        "infra_error": result.infra_error is not None,
        "reward_components": {"resolved": result.reward},
    }
