"""``AgentProgramSource``: an agent program written against the OpenAI SDK as a training source.

The program is ``async def agent(client, task) -> reward``: ``client`` is an
``openai.AsyncOpenAI`` whose base URL is one gateway session, ``task`` one entry of the task list
(a dict, e.g. a line of ``tasks.jsonl``). Every call it makes is recorded token-exact
(``agentgym.gateway.session``); its episode is the session's calls, rewarded by

- the program's return value (a number), or
- ``reward(task, result)`` (sync or async), given the program's return value, or
- an agentgym env id: the env is reset on the task (``task["seed"]``, ``task["options"]``), the
  program gets ``task`` with the env's ``messages`` and ``tools`` added, and its return value (a
  string: the final answer) is the env's one step; the step's reward and info grade it.

Each group plays one task ``group_size`` times (GRPO). Outcomes follow the env rules: a program
that raises is ``infra`` with its exception as the cause (dropped), one that runs past
``deadline`` is ``timeout`` (scored, reward 0), one that never calls the model is dropped with
that cause.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import random
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentgym.core.aio import run_sync
from agentgym.core.difficulty import DIFFICULTY
from agentgym.core.errors import ConfigError
from agentgym.core.info import ERROR, INFRA_ERROR, TASK_ID, TIMED_OUT
from agentgym.core.types import Episode
from agentgym.gateway.app import Gateway
from agentgym.inference.base import InferenceEngine
from agentgym.inference.openai_routes import TINY_NAME
from agentgym.rollout.curriculum import Curriculum, Task, make_curriculum
from agentgym.rollout.source import SourceBase

__all__ = ["AgentProgram", "AgentProgramSource", "load_program", "load_tasks"]

AgentProgram = Callable[[Any, dict[str, Any]], Awaitable[Any]]
"""``async def agent(client: openai.AsyncOpenAI, task: dict) -> reward or final answer``."""

Reward = Callable[[dict[str, Any], Any], float | Awaitable[float]]


def load_program(spec: str | AgentProgram) -> AgentProgram:
    """``spec`` itself, or the async function named ``module:function``."""
    if not isinstance(spec, str):
        function = spec
    else:
        module, _, name = spec.partition(":")
        if not module or not name:
            raise ConfigError("agent", spec, "is not `module:function`", "pass e.g. my_agent:run")
        if os.getcwd() not in sys.path:  # a program beside the run, as `python -m` finds it
            sys.path.append(os.getcwd())
        try:
            function = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            raise ConfigError(
                "agent", spec, f"cannot be loaded ({e})", "check the module is importable"
            ) from e
    if not inspect.iscoroutinefunction(function):
        raise ConfigError(
            "agent",
            getattr(function, "__name__", function),
            "is not an async function",
            "define it as `async def agent(client, task)`",
        )
    return function


def load_tasks(tasks: str | Path | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tasks: a list of dicts, or a JSON-lines file of objects."""
    if isinstance(tasks, str | Path):
        path = Path(tasks)
        if not path.is_file():
            raise ConfigError("tasks", str(path), "is not a file", "pass a tasks.jsonl path")
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise ConfigError(
                        "tasks", f"{path}:{number}", f"is not JSON ({e})", "one object a line"
                    ) from e
        tasks = rows
    out = [dict(t) for t in tasks if isinstance(t, Mapping)]
    if not out or len(out) != len(tasks):
        raise ConfigError(
            "tasks", f"{len(tasks)} entries", "must be a non-empty list of objects", "fix them"
        )
    return out


class AgentProgramSource(SourceBase):
    """Episodes of ``agent`` on ``tasks``, ``group_size`` per task, through a ``Gateway``.

    Args:
        engine: the engine the gateway samples with (attach it to the trainer too:
            ``fit(trainer, source, engine=engine)``).
        tokenizer: the policy's tokenizer.
        agent: the program, or ``module:function``.
        tasks: a list of dicts or a JSON-lines file; group ``j`` plays the ``j``-th task of a
            seeded shuffle of them, reshuffled every pass.
        group_size: runs per task (``config.group_size``).
        reward: None (the program returns its reward), a function ``(task, result)``, or an
            env id that grades the program's final answer.
        env_kwargs: arguments of ``gym.make`` for that env (e.g. ``{"sandbox": "docker"}``).
        seed: the task order's seed.
        max_concurrency: programs running at once.
        deadline: seconds a program may run.
        model_name: the name programs pass as ``model``.
        curriculum: None (the seeded shuffle), or ``uniform``, ``schedule`` or ``adaptive``
            over the tasks (``agentgym.rollout.curriculum``; a task's ``difficulty`` field is
            its level), with ``curriculum_kwargs``. It hears each group's ``success``, which
            only an env grading (``reward`` an env id) says: a reward alone is not a success.
    """

    def __init__(
        self,
        engine: InferenceEngine,
        tokenizer: Any,
        agent: str | AgentProgram,
        tasks: str | Path | Sequence[Mapping[str, Any]],
        *,
        group_size: int,
        reward: str | Reward | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        seed: int = 0,
        max_concurrency: int = 64,
        deadline: float = 600.0,
        model_name: str = TINY_NAME,
        curriculum: str | None = None,
        curriculum_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        for name, value in (("group_size", group_size), ("max_concurrency", max_concurrency)):
            if not isinstance(value, int) or value < 1:
                raise ConfigError(name, value, "must be an int >= 1", "use e.g. 4")
        if not deadline > 0:
            raise ConfigError("deadline", deadline, "must be > 0 seconds", "use e.g. 600")
        if env_kwargs and not isinstance(reward, str):
            raise ConfigError(
                "env_kwargs",
                dict(env_kwargs),
                "are for an env that grades the answer, but reward is not an env id",
                'pass reward="agentgym/<Env>", or drop env_kwargs',
            )
        self.engine = engine
        self.tokenizer = tokenizer
        self.agent = load_program(agent)
        self.tasks = load_tasks(tasks)
        self.group_size, self.seed = group_size, seed
        self.reward = reward
        self.env_kwargs = dict(env_kwargs or {})
        self.max_concurrency, self.deadline = max_concurrency, deadline
        self.model_name = model_name
        self.position = 0
        """Groups collected so far."""
        self.seen_tasks: set[str] = set()
        self.stats: dict[str, float] = {}
        self.curriculum: Curriculum | None = None
        if curriculum is not None:
            levels = [
                Task(f"task={i}", t.get(DIFFICULTY), {"task_id": i})
                for i, t in enumerate(self.tasks)
            ]
            self.curriculum = make_curriculum(
                curriculum, levels, seed=seed, **dict(curriculum_kwargs or {})
            )

    def task_at(self, group: int) -> dict[str, Any]:
        """The task of the run's ``group``-th group (a seeded shuffle per pass)."""
        rounds, index = divmod(group, len(self.tasks))
        order = list(range(len(self.tasks)))
        random.Random(self.seed * 1_000_003 + rounds).shuffle(order)
        return self.tasks[order[index]]

    def collect(self, num_groups: int) -> list[Episode]:
        if self.curriculum is None:
            drawn = None
            tasks = [self.task_at(self.position + j) for j in range(num_groups)]
        else:
            drawn = self.curriculum.next_tasks(num_groups)
            tasks = [self.tasks[int((t.options or {})["task_id"])] for t in drawn]
        episodes = run_sync(self._collect(tasks))
        if drawn is not None and self.curriculum is not None:
            for j, task in enumerate(drawn):
                self.curriculum.update(task, [e.success for e in episodes if e.group == j])
        self.position += num_groups
        for task in tasks:
            if task.get(TASK_ID) is not None:
                self.seen_tasks.add(str(task[TASK_ID]))
        outcomes = [e.outcome for e in episodes]
        self.stats = {f"programs/{o}": float(outcomes.count(o)) for o in sorted(set(outcomes))} | {
            "programs/no_model_call": float(sum(not e.turns for e in episodes))
        }
        return episodes

    async def _collect(self, tasks: list[dict[str, Any]]) -> list[Episode]:
        import httpx
        import openai

        gateway = Gateway(self.engine, self.tokenizer, model_name=self.model_name)
        limit = asyncio.Semaphore(self.max_concurrency)
        transport = httpx.ASGITransport(app=gateway.app())
        async with httpx.AsyncClient(transport=transport, timeout=None) as http:

            async def play(group: int, task: dict[str, Any]) -> Episode:
                async with limit:
                    session = gateway.open(task=task)
                    client = openai.AsyncOpenAI(
                        base_url=gateway.url("http://gateway", session),
                        api_key="agentgym",
                        http_client=http,
                        max_retries=0,
                    )
                    episode = await self._play(gateway, session, client, task)
                episode.group, episode.env_id = group, _env_id(self.reward)
                episode.reset_info = {**episode.reset_info, TASK_ID: task.get(TASK_ID)}
                return episode

            runs = [play(j, t) for j, t in enumerate(tasks) for _ in range(self.group_size)]
            return list(await asyncio.gather(*runs))

    async def _play(
        self, gateway: Gateway, session: str, client: Any, task: dict[str, Any]
    ) -> Episode:
        env = None
        try:
            if isinstance(self.reward, str):
                env, task = await asyncio.to_thread(_reset, self.reward, task, self.env_kwargs)
            try:
                result = await asyncio.wait_for(self.agent(client, task), self.deadline)
            except TimeoutError:
                cause = f"the agent program ran past its deadline of {self.deadline:g} s"
                return _ended(gateway.close(session, 0.0, {TIMED_OUT: True, ERROR: cause}), cause)
            except Exception as e:
                cause = f"the agent program raised {type(e).__name__}: {e}"
                return _failed(gateway, session, cause)
            if not gateway.sessions[session].calls:
                return _failed(gateway, session, "the agent program never called the model")
            try:
                reward, info = await self._grade(env, task, result)
            except Exception as e:
                return _failed(gateway, session, f"grading failed: {type(e).__name__}: {e}")
            return gateway.close(session, reward, info)
        finally:
            if env is not None:
                env.close()

    async def _grade(self, env: Any, task: dict[str, Any], result: Any) -> tuple[float, dict]:
        if env is not None:
            action = result if isinstance(result, str | dict) else json.dumps(result)
            _, reward, _, _, info = await asyncio.to_thread(env.step, action)
            return float(reward), dict(info)
        if self.reward is not None:
            value = self.reward(task, result)
            if inspect.isawaitable(value):
                value = await value
            return _number(value, "reward()"), {}
        return _number(result, "the agent program"), {}

    def state_dict(self) -> dict[str, Any]:
        state = {
            "seed": self.seed,
            "position": self.position,
            "seen_tasks": sorted(self.seen_tasks),
        }
        if self.curriculum is not None:
            state["curriculum"] = self.curriculum.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.seed, self.position = int(state["seed"]), int(state["position"])
        self.seen_tasks = set(state.get("seen_tasks", ()))
        if self.curriculum is not None and "curriculum" in state:
            self.curriculum.load_state_dict(state["curriculum"])


def _env_id(reward: Any) -> str | None:
    return reward if isinstance(reward, str) else None


def _number(value: Any, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"{who} returned {value!r}, not a number: return the reward as a float, or pass "
            "reward= (a function or an env id) to grade the program's result"
        )
    return float(value)


def _reset(
    env_id: str, task: dict[str, Any], kwargs: Mapping[str, Any]
) -> tuple[Any, dict[str, Any]]:
    import gymnasium as gym

    env = gym.make(env_id, **kwargs)
    observation, info = env.reset(seed=task.get("seed"), options=task.get("options"))
    tools = info.get("tools") or []
    return env, {**task, "messages": [dict(m) for m in observation], "tools": list(tools)}


def _failed(gateway: Gateway, session: str, cause: str) -> Episode:
    """The session's episode, dropped: an infrastructure outcome with ``cause``."""
    episode = gateway.close(session, 0.0, {INFRA_ERROR: True, ERROR: cause})
    if not episode.turns:
        episode.reset_info = {INFRA_ERROR: True, ERROR: cause}
    episode.trainable = False
    return episode


def _ended(episode: Episode, cause: str) -> Episode:
    if not episode.turns:  # no call answered (none made, or the first still sampling): no tokens
        episode.reset_info = {INFRA_ERROR: True, ERROR: f"{cause}, before any model call answered"}
        episode.trainable = False
    return episode
