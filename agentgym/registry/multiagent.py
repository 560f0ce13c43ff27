"""Registering multi-agent envs (``agentgym.core.multiagent.MultiAgentEnv``):
``gymnasium.register`` under the hood, kept apart from the single-agent registry.

A multi-agent id lives in Gymnasium's registry (so ids, versions and "did you mean" work as
for every env) and ``agentgym.make(id)`` returns the ``MultiAgentEnv`` itself, made from the
spec's entry point and kwargs. ``gymnasium.make`` refuses it, as PettingZoo's envs: it only
makes ``gymnasium.Env``s, whose ``step`` is single-agent. It is not listed by
``agentgym.list_envs`` (whose envs all pass the single-agent checkers) but by
``list_multiagent_envs`` (``agentgym list`` shows both); training code asks
``is_multiagent(env_id)`` to pick the multi-agent collector. Nothing heavy is imported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from agentgym.core.errors import ConfigError
from agentgym.core.multiagent import MultiAgentEnv
from agentgym.registry import MAKERS, resolve_id

__all__ = [
    "MULTI_AGENT",
    "MultiAgentInfo",
    "is_multiagent",
    "list_multiagent_envs",
    "make",
    "register",
]

MULTI_AGENT = "multi-agent"
"""The tag every multi-agent env carries (``agentgym list --tag multi-agent``)."""


@dataclass(frozen=True)
class MultiAgentInfo:
    """What agentgym knows about a registered multi-agent env (``agentgym list`` shows it)."""

    id: str
    entry_point: Any
    roles: tuple[str, ...]
    description: str = ""
    tags: tuple[str, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    family: str = ""
    extras: tuple[str, ...] = ()


_MULTI: dict[str, MultiAgentInfo] = {}


def register(
    id: str,
    entry_point: Any,
    *,
    roles: Iterable[str],
    description: str = "",
    tags: Iterable[str] = (),
    kwargs: dict[str, Any] | None = None,
    family: str | None = None,
    extras: Iterable[str] = (),
) -> MultiAgentInfo:
    """Register a ``MultiAgentEnv`` under ``id`` (``namespace/Name-vN``).

    Args:
        entry_point: ``"module:Class"`` (imported only when made) or the class.
        roles: the env's ``possible_agents`` (listed without importing it).
        description: one line.
        tags: labels for ``agentgym list``; ``"multi-agent"`` is always added.
        kwargs: default constructor arguments.
        family: the env family (defaults to the name before the first ``-``).
        extras: pip extras the env needs (``pip install 'agentgymnasium[<extra>]'``).
    """
    gym.register(
        id=id,
        entry_point=entry_point,
        order_enforce=False,
        disable_env_checker=True,
        kwargs=dict(kwargs or {}),
    )
    info = MultiAgentInfo(
        id,
        entry_point,
        tuple(roles),
        description,
        tuple(dict.fromkeys([*tags, MULTI_AGENT])),
        dict(kwargs or {}),
        family or id.rpartition("/")[2].split("-")[0],
        tuple(extras),
    )
    _MULTI[id] = info
    MAKERS[id] = make  # agentgym.make(id) makes it
    return info


def is_multiagent(env_id: object) -> bool:
    """Whether ``env_id`` names a registered multi-agent env."""
    return isinstance(env_id, str) and env_id in _MULTI


def list_multiagent_envs(
    *, family: str | None = None, tag: str | None = None
) -> list[MultiAgentInfo]:
    """Every registered multi-agent env, by id (filtered as ``agentgym.list_envs``)."""
    return [
        info
        for _, info in sorted(_MULTI.items())
        if (family is None or info.family == family) and (tag is None or tag in info.tags)
    ]


def multiagent_info(env_id: str) -> MultiAgentInfo:
    resolve_id(env_id)  # "did you mean" for a typo
    if env_id not in _MULTI:
        raise ConfigError(
            "env",
            env_id,
            "is not a multi-agent env",
            f"use one of {sorted(_MULTI)}, or train it as a single-agent env",
        )
    return _MULTI[env_id]


def make(env_id: str, **kwargs: Any) -> MultiAgentEnv:
    """The ``MultiAgentEnv`` of ``env_id``, with ``kwargs`` over its registered defaults."""
    multiagent_info(env_id)
    spec = gym.spec(env_id)
    creator: Any = spec.entry_point
    if isinstance(creator, str):
        creator = load_env_creator(creator)
    env: MultiAgentEnv = creator(**{**spec.kwargs, **kwargs})
    env.spec = spec
    return env
