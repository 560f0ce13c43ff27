"""The rollout collector: a policy × an ``AgentVectorEnv`` → ``Episode``s a trainer learns from.

::

    from agentgym.inference import HFEngine
    from agentgym.models import load
    from agentgym.rollout import acollect, collect

    model, tokenizer = load()
    engine = HFEngine(model, tokenizer)
    episodes = collect(engine, "agentgym/FrozenLake-v0", 64, seed=0, group_size=8,
                       temperature=1.0, max_tokens=64)

    async for episode in acollect(engine, venv, 64):   # an AgentVectorEnv, on your event
        ...                                             # loop: episodes as they finish

Token-in, token-out: each episode's prompt is rendered with the chat template once, the ids the
engine sampled are appended exactly as sampled (``loss_mask`` 1, their sampling ``logprobs``),
and only what the env adds is tokenized, by delta rendering (:mod:`agentgym.rollout.render`).
The action the env receives, and the assistant message recorded in ``Episode.messages``, is the
engine's decoded text (``Completion.text``: special tokens dropped, cut before a stop string);
envs parse tool calls from it themselves.
Envs are driven through the vector env's ragged API: an env whose turn finishes early gets its
next generation at once. With ``group_size=G`` the episodes come in groups of ``G`` that share a
task (``Episode.group``, ``Episode.seed``); ``collect`` returns them ordered by group.

An episode ends when the env terminates or truncates it, after ``max_turns`` turns, when its next
prompt would not fit in ``max_context_tokens`` with one sampled token (the last turn is then
truncated with ``info["truncation_reason"] == "context_length"``; generations are capped to fit),
or when an env call fails (``Transition.infra_error``; the episode is then not ``trainable``). A
model's garbage output is just an action: the env answers it. An exception from the engine is a
bug or an outage: it propagates (with a note naming the env and turn) and the collect call stops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from agentgym.core.aio import run_sync
from agentgym.core.types import Episode
from agentgym.inference.base import InferenceEngine
from agentgym.rollout.collector import Collector
from agentgym.rollout.config import (
    DEFAULT_NUM_ENVS,
    default_context,
    make_plan,
    resolve_env,
    resolve_tokenizer,
)
from agentgym.rollout.render import ChatRenderer, TemplateError
from agentgym.rollout.scaffold import (
    ChatScaffold,
    EpisodeMemory,
    MemoryScaffold,
    ReActScaffold,
    Scaffold,
    history_window,
    make_scaffold,
)
from agentgym.vector import AgentVectorEnv

__all__ = [
    "DEFAULT_NUM_ENVS",
    "ChatRenderer",
    "ChatScaffold",
    "EpisodeMemory",
    "MemoryScaffold",
    "ReActScaffold",
    "Scaffold",
    "TemplateError",
    "acollect",
    "collect",
    "history_window",
    "make_scaffold",
]


async def acollect(
    engine: InferenceEngine,
    env: str | AgentVectorEnv,
    num_episodes: int,
    seed: int | None = None,
    *,
    tokenizer: Any = None,
    group_size: int | None = None,
    max_turns: int | None = None,
    max_context_tokens: int | None = None,
    history_turns: int | None = None,
    action_choices: bool = False,
    num_envs: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    sampling_seed: int | None = None,
    first_group: int = 0,
    task_options: Sequence[Mapping[str, Any] | None] | None = None,
    scaffold: Scaffold | None = None,
    **sampling: Any,
) -> AsyncIterator[Episode]:
    """Play ``num_episodes`` episodes and yield each as it finishes.

    To stop early, close the iterator (``async with contextlib.aclosing(acollect(...)) as it``):
    a ``break`` alone leaves its engine calls and env calls running until it is
    garbage-collected.

    Args:
        engine: any ``InferenceEngine`` (e.g. ``HFEngine``).
        env: an env id (a vector env of ``num_envs`` sub-envs is made with ``env_kwargs`` and
            closed at the end) or an ``AgentVectorEnv`` (left open, with nothing pending).
        num_episodes: a multiple of ``group_size``.
        seed: group ``j`` (in launch order) plays the task of reset seed ``seed + j``; ``None``
            draws a fresh base seed.
        tokenizer: its chat template renders the prompts; default ``engine.tokenizer``.
        group_size: episodes per task; default 1, or the vector env's own.
        max_turns: most assistant turns per episode (``None``: the env decides).
        max_context_tokens: most tokens per episode (per context with ``history_turns``);
            default the model's ``max_position_embeddings`` (else the tokenizer's
            ``model_max_length``).
        history_turns: ``None`` (default): each turn sees the whole conversation. ``k``: each
            turn sees the system messages, the observation ``k`` turns back and the turns
            since (``0``: only the latest observation), as a context of its own: short prompts
            for long episodes or small models. The episode's ``token_ids`` are then the
            turns' contexts one after another (``Episode.context_starts``); earlier turns'
            sampled ids are reused as sampled, never re-tokenized.
        action_choices: constrained decoding: on a turn whose env offers
            ``info["action_choices"]`` (a list of action texts), the model samples only among
            them (``SamplingParams.choices``: each text's ids and the end-of-turn token), so it
            cannot write an invalid action. The turn's choices are kept in
            ``Episode.turn_choices`` for the trainer; tokens that were the only one allowed get
            loss mask 0. Needs an engine that applies choices (``HFEngine``).
        num_envs: sub-envs for an env id; default ``min(num_episodes, 64)`` (whole groups).
        env_kwargs: keyword arguments of the env, for an env id.
        sampling_seed: makes sampling reproducible: each request gets its own seed, derived from
            this one, its group, its place in the group and its turn (``None``: the engine's
            own randomness).
        first_group: the call's group ``j`` samples with the seeds of group
            ``first_group + j`` (a data-parallel rank playing its share of a batch).
        task_options: group ``j``'s reset options (e.g. a curriculum's
            ``{"difficulty": 6}``), one per group; None: reset with the seed alone.
        scaffold: how observations become the prompt and completions the env's actions
            (:mod:`agentgym.rollout.scaffold`); default ``ChatScaffold(history_turns)``: the
            env's messages as they are, the model's text as the action. A scaffold carries its
            own history window: leave ``history_turns`` None with one.
        **sampling: ``SamplingParams`` fields (``temperature``, ``top_p``, ``top_k``,
            ``max_tokens``, ``stop``, ...; ``seed`` is ``sampling_seed``).
    """
    tokenizer = resolve_tokenizer(engine, tokenizer)
    if max_context_tokens is None:
        max_context_tokens = default_context(engine, tokenizer)
    own_size = env.group_size if isinstance(env, AgentVectorEnv) else 1
    plan = make_plan(
        num_episodes,
        seed,
        group_size=own_size if group_size is None else group_size,
        max_turns=max_turns,
        max_context_tokens=max_context_tokens,
        sampling={**sampling, "seed": sampling_seed},
        history_turns=history_turns,
        action_choices=action_choices,
        first_group=first_group,
        task_options=task_options,
        scaffold=scaffold,
    )
    venv, owned = resolve_env(env, num_episodes, group_size, num_envs, env_kwargs)
    collector = Collector(engine, venv, ChatRenderer(tokenizer), plan)
    failed = False
    try:
        async with aclosing(collector.episodes()) as episodes:
            async for episode in episodes:
                yield episode
    except GeneratorExit:  # the caller stopped early: leave its vector env usable
        raise
    except BaseException:
        failed = True
        raise
    finally:
        if owned:
            venv.close()
        elif not failed:
            while venv.pending:  # env calls still running when the caller stopped
                await venv.arecv()


async def _collect_all(*args: Any, **kwargs: Any) -> list[Episode]:
    episodes = [e async for e in acollect(*args, **kwargs)]
    return sorted(episodes, key=lambda e: e.group or 0)  # stable: groups stay contiguous


def collect(
    engine: InferenceEngine,
    env: str | AgentVectorEnv,
    num_episodes: int,
    seed: int | None = None,
    *,
    tokenizer: Any = None,
    group_size: int | None = None,
    max_turns: int | None = None,
    max_context_tokens: int | None = None,
    history_turns: int | None = None,
    action_choices: bool = False,
    num_envs: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    sampling_seed: int | None = None,
    first_group: int = 0,
    task_options: Sequence[Mapping[str, Any] | None] | None = None,
    scaffold: Scaffold | None = None,
    **sampling: Any,
) -> list[Episode]:
    """``acollect`` from synchronous code: every episode, ordered by group (groups contiguous)."""
    return run_sync(
        _collect_all(
            engine,
            env,
            num_episodes,
            seed,
            tokenizer=tokenizer,
            group_size=group_size,
            max_turns=max_turns,
            max_context_tokens=max_context_tokens,
            history_turns=history_turns,
            action_choices=action_choices,
            num_envs=num_envs,
            env_kwargs=env_kwargs,
            sampling_seed=sampling_seed,
            first_group=first_group,
            task_options=task_options,
            scaffold=scaffold,
            **sampling,
        )
    )
