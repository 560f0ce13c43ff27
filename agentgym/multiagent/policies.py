"""What drives a role: a model (``EnginePolicy``) or a scripted player (``ScriptedPolicy``).

A run maps each role to one of them (``policies={"x": EnginePolicy(engine), "o": "random"}``):
the same engine for several roles (one model with role prompts: the env's system message
tells each role who it is, and ``EnginePolicy.system`` can add a prompt of the run's own),
different engines, or a fixed scripted opponent. A string names one of the env's
``scripted_policies``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from agentgym.core.errors import ConfigError
from agentgym.core.types import Observation

if TYPE_CHECKING:
    from agentgym.core.multiagent import MultiAgentEnv
    from agentgym.inference.base import InferenceEngine

__all__ = ["EnginePolicy", "Policy", "ScriptedPolicy", "resolve_policies", "resolve_policy"]

Player = Callable[[Observation, Mapping[str, Any], np.random.Generator], str]
"""A scripted player: ``(observation, info, rng) -> action text``."""


@dataclass(frozen=True)
class EnginePolicy:
    """A role played by ``engine``: its turns are sampled token-exactly and can be trained.

    Args:
        engine: any ``InferenceEngine`` (several roles may share one).
        tokenizer: renders the role's conversation; default ``engine.tokenizer``.
        system: a system message put before the env's first messages to this role (a role
            prompt of the run's own); None: the env's messages only.
    """

    engine: InferenceEngine
    tokenizer: Any = None
    system: str | None = None


@dataclass(frozen=True)
class ScriptedPolicy:
    """A role played by ``player`` (a fixed opponent); its ``rng`` is seeded per game."""

    player: Player
    name: str = "scripted"


Policy = EnginePolicy | ScriptedPolicy


def _load(target: Any) -> Player:
    if callable(target):
        return target  # type: ignore[no-any-return]
    module, _, attribute = str(target).partition(":")
    return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]


def resolve_policies(
    env: type[MultiAgentEnv] | MultiAgentEnv,
    policies: Mapping[str, Policy | str | Player],
) -> dict[str, Policy]:
    """Every role of ``env`` with its policy: the given ones (a string names a scripted
    policy of the env, a callable is a scripted player), the env's ``default_policies`` for
    the rest."""
    roles = tuple(env.possible_agents)
    unknown = set(policies) - set(roles)
    if unknown:
        raise ConfigError(
            "policies", sorted(unknown), f"are not roles of {_name(env)}", f"use roles {roles}"
        )
    resolved: dict[str, Policy] = {}
    for role in roles:
        given = policies.get(role, env.default_policies.get(role))
        if given is None:
            raise ConfigError(
                f"policies[{role!r}]",
                None,
                f"is missing and {_name(env)} has no default policy for it",
                "give the role an EnginePolicy or a scripted policy name",
            )
        resolved[role] = resolve_policy(env, role, given)
    return resolved


def resolve_policy(env: Any, role: str, given: Policy | str | Player) -> Policy:
    """The policy of ``role`` of ``env`` (a class or an env) that ``given`` names: itself, a
    scripted policy of the env by name, or a callable as a scripted player."""
    if isinstance(given, EnginePolicy | ScriptedPolicy):
        return given
    if isinstance(given, str):
        scripted = env.scripted_policies
        if given not in scripted:
            raise ConfigError(
                f"policies[{role!r}]",
                given,
                f"is not a scripted policy of {_name(env)}",
                f"use one of {sorted(scripted)}, or an EnginePolicy",
            )
        return ScriptedPolicy(_load(scripted[given]), given)
    if callable(given):
        return ScriptedPolicy(given, getattr(given, "__name__", "scripted"))
    raise ConfigError(
        f"policies[{role!r}]",
        given,
        "is not a policy",
        "pass an EnginePolicy, a scripted policy name or a callable",
    )


def _name(env: Any) -> str:
    return env.__name__ if isinstance(env, type) else type(env).__name__
