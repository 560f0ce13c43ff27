"""Evaluating any model on an env: n samples per task, pass@k, per-episode JSONL, a summary.

::

    run = evaluate_samples(engine, "agentgym/Math-v0", tasks=50, samples=4, seed=0,
                           max_tokens=turn_tokens("agentgym/Math-v0"), tokenizer=tokenizer)
    print(run.table((1, 4)))                   # success with its 95% interval, pass@k, ...
    write_jsonl(run.records(), "episodes.jsonl")

Task ``j`` is the env's task of reset seed ``seed + j``; its ``samples`` episodes are one group
(``Episode.group == j``). Two ways to play them:

* token ids (``chat=False``): the rollout collector renders prompts with ``tokenizer`` and asks
  ``engine.generate`` (in-process ``HFEngine``, SGLang, an OpenAI-compatible server's
  ``/v1/completions``): exactly what training sees.
* chat (``chat=True``): the conversation goes to ``engine.chat(messages)`` and the server renders
  it (hosted APIs, servers that return no token ids). Evaluation needs no token exactness.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.core.errors import ConfigError
from agentgym.core.jsonsafe import json_safe
from agentgym.core.types import Episode, Message, Turn
from agentgym.inference.base import InferenceEngine, SamplingParams
from agentgym.recipes.failures import failure_of
from agentgym.recipes.report import EvalResult
from agentgym.rollout.collector_source import episode_task

__all__ = [
    "TURN_TOKENS",
    "EvalRun",
    "evaluate_samples",
    "pass_at_k",
    "turn_tokens",
    "write_jsonl",
]

TURN_TOKENS: dict[str, int] = {
    "FrozenLake": 16,  # a fenced move or one tool call
    "Math": 1024,  # reasoning, then \boxed{}
    "Code": 1024,  # a whole program
    "SWE": 2048,  # a patch or a command with its reasoning
    "MCP": 512,
    "Web": 256,  # one browser action
}
"""Most new tokens per turn when evaluating, by env family (``--max-tokens`` overrides)."""
DEFAULT_TURN_TOKENS = 512
"""For a family ``TURN_TOKENS`` does not name (e.g. a plugin's)."""


def turn_tokens(env_id: str) -> int:
    """The default most new tokens per turn for evaluating ``env_id`` (by its family)."""
    from agentgym.registry import env_info

    return TURN_TOKENS.get(env_info(env_id).family, DEFAULT_TURN_TOKENS)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of which ``c`` passed:
    ``1 - C(n - c, k) / C(n, k)`` (Chen et al. 2021, "Evaluating Large Language Models Trained
    on Code", eq. 1), computed as a product for numerical stability."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ConfigError("pass_at_k", (n, c, k), "needs 0 <= c <= n and 1 <= k <= n", "fix k")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@dataclass(frozen=True)
class EvalRun:
    """The episodes of one evaluation, ordered by task (``group``) then sample."""

    episodes: list[Episode]
    samples: int
    seconds: float
    api: str
    """How the model was asked: "tokens" (token ids) or "chat" (the server rendered)."""

    @property
    def result(self) -> EvalResult:
        return EvalResult.of(self.episodes)

    @property
    def tokens(self) -> int:
        """Tokens the model sampled, over every episode (0 where the server did not say)."""
        return int(sum(e.metrics.get("sampled_tokens", 0.0) for e in self.episodes))

    def _groups(self) -> dict[int, list[bool | None]]:
        """Each task's samples' success (None: not judged, e.g. failed outside the model)."""
        groups: dict[int, list[bool | None]] = {}
        for episode in self.episodes:
            judged = episode.success if failure_of(episode) is None else None
            groups.setdefault(episode.group or 0, []).append(judged)
        return groups

    def pass_at(self, ks: Sequence[int]) -> dict[int, float]:
        """pass@k for each k, averaged over the tasks whose env said success for every sample
        (a task with an episode that failed outside the model is left out); NaN when no task
        was judged so."""
        judged = [g for g in self._groups().values() if all(ok is not None for ok in g)]
        return {
            k: (
                sum(pass_at_k(len(g), sum(map(bool, g)), k) for g in judged) / len(judged)
                if judged
                else math.nan
            )
            for k in ks
        }

    def records(self) -> Iterator[dict[str, Any]]:
        """One JSON-safe row per episode: ``task_id``, ``task`` (its index), ``sample``,
        ``seed`` (reset seed), ``messages``, ``reward`` (the return), ``success``, ``turns``,
        ``tokens`` (sampled), ``outcome`` (``Episode.outcome``), ``cause`` (an ``infra``
        episode's error, else None), ``infra_error`` and ``info`` (the last step's, or the
        reset's)."""
        for episode in self.episodes:
            last = episode.turns[-1].info if episode.turns else episode.reset_info
            yield {
                "task_id": episode_task(episode),
                "task": episode.group,
                "sample": int(episode.metrics.get("sample", 0)),
                "seed": episode.seed,
                "messages": json_safe(episode.messages),
                "reward": episode.total_reward,
                "success": episode.success,
                "turns": len(episode.turns),
                "tokens": int(episode.metrics.get("sampled_tokens", 0.0)),
                "outcome": episode.outcome,
                "cause": episode.cause,
                "infra_error": episode.infra_error,
                "info": json_safe({k: v for k, v in last.items() if k != "tools"}),
            }

    def to_dict(self, ks: Sequence[int] = ()) -> dict[str, Any]:
        """The summary as JSON (``pass_at_k`` values None where no task was judged)."""
        result = self.result
        return {
            **result.to_dict(),
            "tasks": len({e.group for e in self.episodes}),
            "tasks_judged": self._tasks_judged(),
            "samples": self.samples,
            "pass_at_k": {str(k): _finite(v) for k, v in self.pass_at(ks).items()},
            "tokens": self.tokens,
            "seconds": self.seconds,
            "api": self.api,
        }

    def _tasks_judged(self) -> int:
        return sum(all(ok is not None for ok in g) for g in self._groups().values())

    def _pass_rows(self, ks: Sequence[int]) -> list[tuple[str, str]]:
        """pass@k's rows: over the tasks judged, saying so when some were not."""
        tasks, judged = len(self._groups()), self._tasks_judged()
        if not judged:
            return [(f"pass@{k}", "n/a (no task had every sample judged)") for k in ks]
        over = f" (over {judged} of {tasks} tasks)" if judged < tasks else ""
        return [(f"pass@{k}", f"{v:.3f}{over}") for k, v in self.pass_at(ks).items()]

    def table(self, ks: Sequence[int] = ()) -> str:
        """The summary as text: the success rate with its 95% interval and the mean return
        (``EvalResult.describe``), then a line each for the episodes, those not judged (the
        failures by cause), pass@k, tokens, time."""
        result = self.result
        rows = [
            ("episodes", f"{result.episodes} ({len(self.episodes) // self.samples} tasks x "
             f"{self.samples} sample{'s' if self.samples > 1 else ''})"),
            *self._pass_rows(ks),
            ("tokens", f"{self.tokens} sampled ({self.tokens / max(1, result.episodes):.1f} "
             "per episode)"),
            ("time", f"{self.seconds:.1f} s ({result.episodes / max(self.seconds, 1e-9):.2f} "
             "episodes/s)"),
        ]  # fmt: skip
        unknown = len(result.outcomes) - result.judged
        if result.failures:
            failed = f"{len(result.failures)} episodes, not judged (by cause, one example each):"
            rows.insert(1, ("failed", failed))
        if unknown:
            rows.insert(1, ("success unknown", f"{unknown} episodes (no info['success'])"))
        lines = []
        for name, value in rows:
            lines.append(f"  {name:<16}{value}")
            if name == "failed":
                lines.extend(result.failure_lines(" " * 20))
        return "\n".join([result.describe(), *lines])


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def write_jsonl(records: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write one JSON object per line to ``path``; the number of lines."""
    count = 0
    with Path(path).open("w") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
            count += 1
    return count


def write_trace(
    episodes: Sequence[Episode], output: str | Path, mode: str, tokenizer: Any = None
) -> Path | None:
    """The trace of an evaluation's ``episodes`` (``docs/traces.md``), as update 0 in the
    folder ``<output>.traces`` (``agentgym.rollout.traces.read`` reads it); None when ``mode``
    is ``off``."""
    from agentgym.rollout.traces import Trace

    folder = Path(f"{output}.traces")
    trace = Trace(folder.parent, mode, folder=folder)
    if not trace.on:
        return None
    trace.load_state_dict(None)  # an earlier evaluation's files go
    if tokenizer is not None:
        trace.start(tokenizer)
    trace.write(0, episodes)
    trace.close()
    return folder


def evaluate_samples(
    engine: InferenceEngine,
    env: str,
    *,
    tasks: int,
    samples: int = 1,
    seed: int,
    temperature: float = 1.0,
    max_tokens: int,
    concurrency: int = 64,
    env_kwargs: Mapping[str, Any] | None = None,
    tokenizer: Any = None,
    chat: bool = False,
    history_turns: int | None = None,
    action_choices: bool = False,
    scaffold: Any = None,
) -> EvalRun:
    """Play ``samples`` episodes of each of ``tasks`` tasks, at most ``concurrency`` at once;
    see the module docstring. Sampling is seeded from ``seed``: each request gets its own seed
    from (seed, task, sample, turn)."""
    if samples < 1 or tasks < 1:
        raise ConfigError("tasks/samples", (tasks, samples), "must be >= 1", "use e.g. -n 1")
    if chat and (history_turns is not None or action_choices or scaffold is not None):
        raise ConfigError(
            "history_turns/action_choices/scaffold",
            (history_turns, action_choices, scaffold),
            "need token ids; the chat API sends the whole conversation, unconstrained",
            "evaluate with --api completions and a tokenizer, or drop them",
        )
    start = time.perf_counter()
    sampling = SamplingParams(temperature=temperature, max_tokens=max_tokens)
    if chat:
        played = _chat_episodes(
            engine, env, tasks, samples, seed, concurrency, env_kwargs, sampling
        )
    else:
        played = _token_episodes(
            engine, env, tasks, samples, seed, concurrency, env_kwargs, sampling,
            tokenizer=tokenizer, history_turns=history_turns, action_choices=action_choices,
            scaffold=scaffold,
        )  # fmt: skip
    return EvalRun(played, samples, time.perf_counter() - start, "chat" if chat else "tokens")


def _slots(concurrency: int, samples: int, episodes: int) -> int:
    """Sub-envs: ``concurrency`` rounded down to whole groups (at least one group)."""
    if concurrency < 1:
        raise ConfigError("concurrency", concurrency, "must be >= 1", "use e.g. 64")
    return min(episodes, max(samples, concurrency // samples * samples))


def _token_episodes(
    engine: InferenceEngine,
    env: str,
    tasks: int,
    samples: int,
    seed: int,
    concurrency: int,
    env_kwargs: Mapping[str, Any] | None,
    sampling: SamplingParams,
    **collect_kwargs: Any,
) -> list[Episode]:
    from agentgym.rollout import collect

    episodes = collect(
        engine,
        env,
        tasks * samples,
        seed,
        group_size=samples,
        num_envs=_slots(concurrency, samples, tasks * samples),
        env_kwargs=env_kwargs,
        sampling_seed=seed,
        temperature=sampling.temperature,
        max_tokens=sampling.max_tokens,
        **collect_kwargs,
    )
    for episode in episodes:  # a group's members run on consecutive sub-envs
        episode.metrics["sample"] = float(int(episode.metrics["env_index"]) % samples)
    return sorted(episodes, key=lambda e: (e.group or 0, e.metrics["sample"]))


def _chat_episodes(
    engine: Any,
    env: str,
    tasks: int,
    samples: int,
    seed: int,
    concurrency: int,
    env_kwargs: Mapping[str, Any] | None,
    sampling: SamplingParams,
) -> list[Episode]:
    from agentgym.core.aio import run_sync
    from agentgym.vector import AgentVectorEnv

    if not hasattr(engine, "chat"):
        raise ConfigError(
            "engine", type(engine).__name__, "has no chat API", "use an OpenAI-compatible server"
        )
    venv = AgentVectorEnv.from_id(
        env, num_envs=_slots(concurrency, 1, tasks * samples), **dict(env_kwargs or {})
    )
    jobs = iter([(task, sample) for task in range(tasks) for sample in range(samples)])
    played: list[Episode] = []

    async def worker(index: int) -> None:
        for task, sample in jobs:  # shared by the workers: each job is taken once
            played.append(await _chat_episode(engine, venv, index, task, sample, seed, sampling))

    try:
        run_sync(_gather([worker(i) for i in range(venv.num_envs)]))
    finally:
        venv.close()
    return sorted(played, key=lambda e: (e.group or 0, e.metrics["sample"]))


async def _gather(workers: list[Any]) -> None:
    """Run ``workers`` together; the first failure cancels the others and is raised."""
    try:
        async with asyncio.TaskGroup() as group:
            for worker in workers:
                group.create_task(worker)
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None


async def _chat_episode(
    engine: Any, venv: Any, index: int, task: int, sample: int, seed: int, sampling: SamplingParams
) -> Episode:
    """One episode on sub-env ``index`` through ``engine.chat``."""
    transition = await venv.areset_one(index, seed=seed + task)
    episode = Episode(venv.spec.id if venv.spec else None, group=task, seed=seed + task)
    episode.messages.extend(transition.observation)
    episode.reset_info = dict(transition.info)
    tools = transition.info.get("tools") or None
    sampled = 0
    while not transition.done:
        turn_seed = np.random.SeedSequence([seed, task, sample, len(episode.turns)])
        turn_sampling = dataclasses.replace(sampling, seed=int(turn_seed.generate_state(1)[0]))
        completion = await engine.chat(episode.messages, turn_sampling, tools=tools)
        sampled += len(completion.token_ids)
        action: Message = dict(completion.message or {"role": "assistant"})  # type: ignore[assignment]
        action["content"] = action.get("content") or ""
        episode.messages.append(action)
        transition = await venv.astep_one(index, action)
        info = dict(transition.info)
        turn = Turn(action, transition.observation, transition.reward, transition.terminated,
                    transition.truncated, info)  # fmt: skip
        episode.turns.append(turn)
        episode.messages.extend(transition.observation)
    episode.trainable = False
    episode.metrics = {"sample": float(sample), "sampled_tokens": float(sampled)}
    return episode
