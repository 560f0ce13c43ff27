"""The collector's arguments, checked and resolved before anything runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym.core.errors import ConfigError
from agentgym.inference.base import SamplingParams
from agentgym.rollout.scaffold import ChatScaffold, Scaffold
from agentgym.vector import AgentVectorEnv

__all__ = [
    "DEFAULT_NUM_ENVS",
    "RolloutPlan",
    "default_context",
    "make_plan",
    "make_sampling",
    "resolve_env",
    "resolve_tokenizer",
]

DEFAULT_NUM_ENVS = 64
"""Sub-envs built for an env id when ``num_envs`` is not given (fewer for fewer episodes)."""

_NO_LIMIT = 10**9  # tokenizers report "no limit" as a huge model_max_length


@dataclass(frozen=True)
class RolloutPlan:
    """What one collect call does."""

    num_episodes: int
    group_size: int
    seed: int
    """Group ``j`` of the call (in launch order) plays the task of reset seed ``seed + j``."""
    sampling: SamplingParams
    max_turns: int | None
    max_context_tokens: int | None
    scaffold: Scaffold = field(default_factory=ChatScaffold)
    """How observations become the prompt and completions the env's actions, and the history
    window (``agentgym.rollout.scaffold``)."""
    action_choices: bool = False
    """Constrained decoding: where the env offers ``info["action_choices"]``, the model samples
    only among those actions (``SamplingParams.choices``)."""
    first_group: int = 0
    """Group ``j`` of the call samples with the seeds of group ``first_group + j``: a call that
    plays a share of a larger batch (one data-parallel rank's) samples as the whole would."""
    task_options: tuple[dict[str, Any] | None, ...] | None = None
    """Group ``j``'s reset options (a curriculum's task), one per group; None: no options."""

    @property
    def num_groups(self) -> int:
        return self.num_episodes // self.group_size

    @property
    def history_turns(self) -> int | None:
        """None: the model sees the whole conversation; k: the system messages, the observation
        k turns back and the turns since (0: only the latest observation)."""
        return self.scaffold.history_turns


def make_plan(
    num_episodes: int,
    seed: int | None,
    *,
    group_size: int,
    max_turns: int | None,
    max_context_tokens: int | None,
    sampling: Mapping[str, Any],
    history_turns: int | None = None,
    action_choices: bool = False,
    first_group: int = 0,
    scaffold: Scaffold | None = None,
    task_options: Sequence[Mapping[str, Any] | None] | None = None,
) -> RolloutPlan:
    _check_int("group_size", group_size, 1, "pass group_size=1, or the GRPO group size")
    _check_int("num_episodes", num_episodes, 1, "ask for at least one episode")
    if num_episodes % group_size:
        raise ConfigError(
            "num_episodes",
            num_episodes,
            f"must be a multiple of group_size={group_size} (a group's episodes share a task "
            "and are only useful together)",
            f"ask for {(num_episodes // group_size + 1) * group_size} episodes, or change "
            "group_size",
        )
    if seed is not None:
        _check_int("seed", seed, 0, "pass None or an int >= 0")
    if max_turns is not None:
        _check_int("max_turns", max_turns, 1, "pass None (the env's own limit) or an int >= 1")
    if max_context_tokens is not None:
        _check_int("max_context_tokens", max_context_tokens, 2, "pass None or an int >= 2")
    if history_turns is not None:
        fix = "pass None (the whole conversation) or an int >= 0 (0: the latest observation)"
        _check_int("history_turns", history_turns, 0, fix)
    groups = num_episodes // group_size
    options = None if task_options is None else _task_options(task_options, groups)
    return RolloutPlan(
        num_episodes=num_episodes,
        group_size=group_size,
        seed=_fresh_seed() if seed is None else seed,
        sampling=make_sampling(sampling),
        max_turns=max_turns,
        max_context_tokens=max_context_tokens,
        scaffold=_resolve_scaffold(scaffold, history_turns),
        action_choices=_check_bool("action_choices", action_choices),
        first_group=first_group,
        task_options=options,
    )


def _task_options(
    task_options: Sequence[Mapping[str, Any] | None], num_groups: int
) -> tuple[dict[str, Any] | None, ...]:
    if len(task_options) != num_groups:
        raise ConfigError(
            "task_options",
            len(task_options),
            f"must hold one entry per group ({num_groups})",
            "pass one reset-options dict (or None) per group",
        )
    return tuple(None if o is None else dict(o) for o in task_options)


def _resolve_scaffold(scaffold: Scaffold | None, history_turns: int | None) -> Scaffold:
    """``scaffold``, or the default one with the window ``history_turns``."""
    window = None if history_turns is None else int(history_turns)
    if scaffold is None:
        return ChatScaffold(history_turns=window)
    if not isinstance(scaffold, Scaffold):
        raise ConfigError(
            "scaffold",
            type(scaffold).__name__,
            "is not a Scaffold (history_turns, reset_messages, step_messages, action)",
            "pass agentgym.rollout.ChatScaffold(), ReActScaffold() or your own Scaffold",
        )
    if window is not None and window != scaffold.history_turns:
        raise ConfigError(
            "history_turns",
            window,
            f"differs from the scaffold's history_turns={scaffold.history_turns}",
            "set the window on the scaffold (e.g. ReActScaffold(history_turns=2)) and leave "
            "history_turns=None",
        )
    return scaffold


def make_sampling(fields: Mapping[str, Any]) -> SamplingParams:
    """``SamplingParams(**fields)``, with a ``ConfigError`` naming an unknown field."""
    known = {f.name for f in dataclasses.fields(SamplingParams)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ConfigError(
            "sampling",
            unknown,
            "are not SamplingParams fields",
            f"pass only {sorted(known)}",
        )
    return SamplingParams(**fields)


def resolve_env(
    env: str | AgentVectorEnv,
    num_episodes: int,
    group_size: int | None,
    num_envs: int | None,
    env_kwargs: Mapping[str, Any] | None,
) -> tuple[AgentVectorEnv, bool]:
    """``(vector env, whether the collector made it and must close it)``."""
    if isinstance(env, AgentVectorEnv):
        if group_size is not None and group_size != env.group_size:
            raise ConfigError(
                "group_size",
                group_size,
                f"differs from the vector env's group_size={env.group_size}",
                "leave group_size=None with a vector env, or build it with that group_size",
            )
        if num_envs is not None or env_kwargs:
            raise ConfigError(
                "num_envs/env_kwargs",
                (num_envs, env_kwargs),
                "only apply when env is an env id",
                "configure the vector env you pass, or pass an env id",
            )
        return env, False
    if not isinstance(env, str):
        raise ConfigError(
            "env", type(env).__name__, "must be an env id or an AgentVectorEnv", "pass an id"
        )
    size = 1 if group_size is None else group_size
    if num_envs is None:
        num_envs = min(num_episodes, max(size, DEFAULT_NUM_ENVS // size * size))
    kwargs = dict(env_kwargs or {})
    return AgentVectorEnv.from_id(env, num_envs=num_envs, group_size=size, **kwargs), True


def resolve_tokenizer(engine: object, tokenizer: Any) -> Any:
    """``tokenizer``, or the engine's own (``engine.tokenizer``)."""
    tokenizer = tokenizer if tokenizer is not None else getattr(engine, "tokenizer", None)
    if tokenizer is None or not hasattr(tokenizer, "apply_chat_template"):
        raise ConfigError(
            "tokenizer",
            type(tokenizer).__name__,
            "must be a transformers tokenizer with a chat template (the engine has none)",
            "pass tokenizer=... (e.g. agentgym.models.load_tokenizer())",
        )
    return tokenizer


def default_context(engine: object, tokenizer: Any) -> int | None:
    """The model's ``max_position_embeddings``, else the tokenizer's ``model_max_length``."""
    config = getattr(getattr(engine, "model", None), "config", None)
    limit = getattr(config, "max_position_embeddings", None)
    if isinstance(limit, int) and limit > 1:
        return limit
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 1 < limit < _NO_LIMIT:
        return limit
    return None


def _check_int(name: str, value: object, least: int, fix: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
        raise ConfigError(name, value, f"must be an int >= {least}", fix)


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(name, value, "must be a bool", "pass True or False")
    return value


def _fresh_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1)[0])
