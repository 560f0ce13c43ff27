"""Train any agentgym env with TRL's ``GRPOTrainer``, through its ``rollout_func``.

::

    from trl import GRPOConfig, GRPOTrainer
    from agentgym.integrations.trl import AgentGymRollout, env_reward, task_dataset

    trainer = GRPOTrainer(
        model=model,                          # any causal LM with a chat template
        processing_class=tokenizer,
        reward_funcs=[env_reward],            # the episode's return, as the env gave it
        args=GRPOConfig(num_generations=4, max_completion_length=16, ...),
        train_dataset=task_dataset("agentgym/FrozenLake-v0", num_tasks=64),
        rollout_func=AgentGymRollout(max_turns=8, env_kwargs={"tool": False}),
    )
    trainer.train()

How it fits together. The dataset's ``prompt`` column holds one task key per row
(``"agentgym/FrozenLake-v0 seed=17"``, :func:`task_prompt`): TRL hands ``rollout_func`` only the
prompts, so the key is how a rollout knows which env to make and which reset seed to play. TRL
repeats each row ``num_generations`` times; :class:`AgentGymRollout` plays the copies of a key
as one group of episodes on that task with agentgym's rollout collector (multi-turn, one vector
env per group, all groups at once), and returns per episode:

- ``prompt_ids``: the chat template's rendering of the reset messages (and tool schemas);
- ``completion_ids``: every later token of the episode: each turn's sampled ids exactly as the
  generator returned them, and between turns the env's messages, tokenized by the collector's
  delta rendering (never decoded and re-encoded);
- ``env_mask`` (TRL's name for a loss mask inside the completion): 1 on sampled tokens, 0 on
  the env's; all 0 for an episode with an infrastructure failure;
- ``logprobs``: the generator's per-token log-probabilities where it gives them (0.0 on env
  tokens), else ``None``;
- ``agentgym_reward`` / ``agentgym_success`` / ``agentgym_turns``: what the env said, read by
  :func:`env_reward` and :func:`env_success` (``None`` for an episode that must not be scored:
  TRL then gives it no advantage).

What is exact and what is not. Exact: the tokens TRL computes its loss on are the ids that were
sampled, and the env received their decoding (special tokens dropped); the env's tokens are in
the sequence TRL scores but masked out of the loss. Not exact, by TRL's design: the decoded
``completions`` TRL passes to reward functions and logs are the whole episode, env text
included; ``max_completion_length`` caps each turn, not the episode (an episode is up to
``max_turns`` turns long plus the env's messages, within the model's context); TRL's
``mask_truncated_completions`` looks only at the episode's last token. A history window
(the collector's ``history_turns``) and constrained decoding (``action_choices``) are not
offered: TRL trains one sequence per sample, without choice-restricted logits.

Where the tokens come from is TRL's choice: by default :class:`TRLEngine` calls the trainer's
own generation for each turn (transformers ``generate`` on the training model, or TRL's vLLM
server or colocated vLLM when ``GRPOConfig(use_vllm=True)``; TRL syncs vLLM's weights before
each rollout). Sampling is the trainer's ``GRPOConfig`` (``temperature``, ``top_p``, ``top_k``,
``max_completion_length``, ``generation_kwargs``). Pass ``engine=`` any agentgym
``InferenceEngine`` to sample elsewhere (keeping its weights current is then yours).
``TRLEngine`` calls ``GRPOTrainer._generate_single_turn``, a private method: the ``trl`` extra
caps TRL at the minor release this was tested with. Tested in one process. Several processes
(``accelerate launch``) each play their own prompts, but episodes of different lengths make
different numbers of generation calls per process, so a generation that is a collective
operation (vLLM server mode gathers prompts across processes; DeepSpeed ZeRO-3 gathers
parameters) can hang: this integration does not line up the processes' calls.

Envs may also reach TRL over the network: ``agentgym serve-env`` serves any env with OpenEnv's
protocol, which TRL's OpenEnv examples speak (docs/integrations.md).
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.inference.base import Completion, InferenceEngine, SamplingParams, reject_choices
from agentgym.rollout import acollect

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = [
    "AgentGymRollout",
    "TRLEngine",
    "env_reward",
    "env_success",
    "episode_fields",
    "parse_task_prompt",
    "task_dataset",
    "task_prompt",
]

_TASK = re.compile(r"^(?P<env>\S+) seed=(?P<seed>\d+)$")


def task_prompt(env_id: str, seed: int) -> str:
    """The dataset prompt that stands for the task of ``env_id`` reset with ``seed``."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError("seed", seed, "must be an int >= 0", "pass a reset seed such as 0")
    if not env_id or any(c.isspace() for c in env_id):
        raise ConfigError("env_id", env_id, "must be an env id", "pass e.g. agentgym/Math-v0")
    return f"{env_id} seed={seed}"


def parse_task_prompt(prompt: object) -> tuple[str, int]:
    """``(env_id, seed)`` of a :func:`task_prompt`."""
    match = _TASK.match(prompt) if isinstance(prompt, str) else None
    if match is None:
        raise ConfigError(
            "prompt",
            prompt,
            "is not an agentgym task key ('<env id> seed=<int>')",
            "build the train dataset with agentgym.integrations.trl.task_dataset",
        )
    return match["env"], int(match["seed"])


def task_dataset(env_id: str, num_tasks: int, seed: int = 0) -> Dataset:
    """A ``datasets.Dataset`` of ``num_tasks`` tasks of ``env_id``: reset seeds ``seed``,
    ``seed + 1``, ...; columns ``prompt`` (the task key), ``env_id`` and ``seed``."""
    from datasets import Dataset

    if not isinstance(num_tasks, int) or isinstance(num_tasks, bool) or num_tasks < 1:
        raise ConfigError("num_tasks", num_tasks, "must be an int >= 1", "pass e.g. 64")
    rows = [
        {"prompt": task_prompt(env_id, s), "env_id": env_id, "seed": s}
        for s in range(seed, seed + num_tasks)
    ]
    return Dataset.from_list(rows)


class TRLEngine:
    """An agentgym ``InferenceEngine`` that samples with a TRL trainer's own generation.

    Requests that arrive together are generated as one batch; one batch runs at a time. The
    trainer's ``GRPOConfig`` decides sampling: of ``SamplingParams`` only ``max_tokens`` applies
    (a longer completion is cut there, ``finish_reason="length"``).
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.tokenizer = getattr(trainer, "_tokenizer", None) or trainer.processing_class
        self.model = trainer.model
        self._pending: list[tuple[list[int], asyncio.Future[tuple[list[int], Any]]]] = []
        self._batch: asyncio.Task[None] | None = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]
        self._locks = weakref.WeakKeyDictionary()
        self.gave_logprobs = True
        """False once a batch came without log-probabilities (transformers generation)."""

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        reject_choices(sampling, "TRLEngine")
        future: asyncio.Future[tuple[list[int], Any]] = asyncio.get_running_loop().create_future()
        self._pending.append((list(prompt_token_ids), future))
        if self._batch is None:
            self._batch = asyncio.ensure_future(self._run_batch())
        ids, logprobs = await future
        return self._completion(ids, logprobs, sampling.max_tokens)

    async def _run_batch(self) -> None:
        # One lock per event loop: each rollout call may run on a loop of its own.
        lock = self._locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            await asyncio.sleep(0)  # requests made in the same loop iteration join this batch
            batch, self._pending, self._batch = self._pending, [], None
            try:
                ids, logprobs = await asyncio.to_thread(
                    self.trainer._generate_single_turn, [p for p, _ in batch], None, {}, 1
                )
            except Exception as error:  # each request's caller gets it (the collector adds
                for _, future in batch:  # which env and turn)
                    if not future.done():
                        future.set_exception(error)
                return
            self.gave_logprobs &= logprobs is not None
            for i, (_, future) in enumerate(batch):
                if not future.done():
                    future.set_result((list(ids[i]), None if logprobs is None else logprobs[i]))

    def _completion(self, ids: list[int], logprobs: Any, max_tokens: int) -> Completion:
        ended = bool(ids) and ids[-1] in set(self.trainer.eos_token_ids)
        if len(ids) > max_tokens:
            ids, ended = ids[:max_tokens], False
        # vLLM reports a logprob it could not compute as None; TRL reads NaN as "no correction".
        values = (
            [0.0] * len(ids)
            if logprobs is None
            else [float("nan") if x is None else float(x) for x in logprobs[: len(ids)]]
        )
        return Completion(
            token_ids=ids,
            logprobs=values,
            finish_reason="stop" if ended else "length",
            text=self.tokenizer.decode(ids, skip_special_tokens=True),
            logprob_mode="none" if logprobs is None else "raw",
            stop=ids[-1] if ended else None,
        )

    async def update_weights(self, weights: Any) -> None:
        """Nothing to do: the trainer's generation reads its live weights (TRL syncs vLLM)."""

    async def close(self) -> None:
        """Nothing to release: the trainer owns the model."""


class AgentGymRollout:
    """A ``rollout_func`` for TRL's ``GRPOTrainer`` that plays agentgym episodes.

    Args:
        engine: where tokens come from; default a :class:`TRLEngine` of the trainer.
        max_turns: most assistant turns per episode (``None``: the env decides).
        max_context_tokens: most tokens per episode; default the model's context length.
        env_kwargs: keyword arguments for every env made (e.g. ``{"tool": False}``).
        sampling: ``SamplingParams`` fields for a given ``engine`` (the default engine takes
            TRL's sampling from ``GRPOConfig``; only ``max_tokens`` applies to it).

    ``last_episodes`` holds the episodes of the latest call, in the order of its prompts.
    """

    def __init__(
        self,
        *,
        engine: InferenceEngine | None = None,
        max_turns: int | None = None,
        max_context_tokens: int | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> None:
        if engine is not None and not isinstance(engine, InferenceEngine):
            raise ConfigError(
                "engine",
                type(engine).__name__,
                "is not an agentgym InferenceEngine",
                "pass None (the trainer's own generation) or e.g. an OpenAIEngine",
            )
        if engine is None and sampling and set(sampling) - {"max_tokens"}:
            raise ConfigError(
                "sampling",
                sorted(sampling),
                "only max_tokens applies to the trainer's own generation",
                "set temperature, top_p, top_k in GRPOConfig, or pass an engine",
            )
        self.engine = engine
        self.max_turns = max_turns
        self.max_context_tokens = max_context_tokens
        self.env_kwargs = dict(env_kwargs or {})
        self.sampling = dict(sampling or {})
        self.last_episodes: list[Episode] = []
        self._trl_engines: dict[int, TRLEngine] = {}

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any] | None]:
        engine = self._engine_for(trainer)
        tokenizer = getattr(trainer, "_tokenizer", None) or trainer.processing_class
        slots: dict[tuple[str, int], list[int]] = defaultdict(list)
        for position, prompt in enumerate(prompts):
            slots[parse_task_prompt(prompt)].append(position)
        played = run_sync(self._play(engine, tokenizer, slots))
        episodes: list[Episode | None] = [None] * len(prompts)
        for key, positions in slots.items():
            for position, episode in zip(positions, played[key], strict=True):
                episodes[position] = episode
        self.last_episodes = [e for e in episodes if e is not None]
        logprobs = not isinstance(engine, TRLEngine) or engine.gave_logprobs
        return episode_fields(self.last_episodes, tokenizer.eos_token_id, logprobs=logprobs)

    def _engine_for(self, trainer: Any) -> InferenceEngine:
        if self.engine is not None:
            return self.engine
        if id(trainer) not in self._trl_engines:
            self._trl_engines[id(trainer)] = TRLEngine(trainer)
        return self._trl_engines[id(trainer)]

    async def _play(
        self,
        engine: InferenceEngine,
        tokenizer: Any,
        slots: Mapping[tuple[str, int], list[int]],
    ) -> dict[tuple[str, int], list[Episode]]:
        async def group(env_id: str, seed: int, size: int) -> list[Episode]:
            return [
                episode
                async for episode in acollect(
                    engine,
                    env_id,
                    size,
                    seed,
                    tokenizer=tokenizer,
                    group_size=size,
                    num_envs=size,
                    max_turns=self.max_turns,
                    max_context_tokens=self.max_context_tokens,
                    env_kwargs=self.env_kwargs,
                    **self.sampling,
                )
            ]

        keys = list(slots)
        groups = await asyncio.gather(*(group(e, s, len(slots[(e, s)])) for e, s in keys))
        return dict(zip(keys, groups, strict=True))


def episode_fields(
    episodes: Sequence[Episode], eos_token_id: int, *, logprobs: bool = True
) -> dict[str, list[Any] | None]:
    """The ``rollout_func`` output of ``episodes``: TRL's fields and the env's outcome;
    ``logprobs=False`` (the generator gave none) returns ``"logprobs": None``.

    An episode with no turn (its prompt filled the context) gets the completion
    ``[eos_token_id]`` with mask 0 and no reward.
    """
    fields: dict[str, list[Any]] = defaultdict(list)
    for episode in episodes:
        if episode.context_starts:
            raise ConfigError(
                "history_turns",
                len(episode.context_starts),
                "gives an episode several contexts; TRL trains one sequence per sample",
                "collect whole conversations (history_turns=None)",
            )
        start = episode.turn_spans[0][0] if episode.turn_spans else len(episode.token_ids)
        completion = episode.token_ids[start:] or [eos_token_id]
        mask = episode.loss_mask[start:] if episode.turn_spans else [0]
        scored = episode.trainable and bool(episode.turns)
        fields["prompt_ids"].append(episode.token_ids[:start])
        fields["completion_ids"].append(completion)
        fields["env_mask"].append(mask if episode.trainable else [0] * len(completion))
        fields["logprobs"].append(episode.logprobs[start:] or [0.0])
        fields["agentgym_reward"].append(episode.total_reward if scored else None)
        fields["agentgym_success"].append(episode.success if scored else None)
        fields["agentgym_turns"].append(len(episode.turns))
    out: dict[str, list[Any] | None] = dict(fields)
    if not logprobs:
        out["logprobs"] = None
    return out


def env_reward(completions: list[Any], agentgym_reward: list[float | None], **_: Any) -> list:
    """TRL reward function: each episode's return (the sum of its env rewards)."""
    return list(agentgym_reward)


def env_success(completions: list[Any], agentgym_success: list[bool | None], **_: Any) -> list:
    """TRL reward function: 1.0 for an episode the env calls a success, else 0.0 (``None`` where
    the env does not say)."""
    return [None if s is None else float(s) for s in agentgym_success]
