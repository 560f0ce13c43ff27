"""``agentgym train`` on a multi-agent env: the run's source and its evaluations.

The run file's ``train_roles`` (``--train-roles x``; comma-separated) names the roles the
policy plays and learns; ``role_policies`` (``--role-policies o=heuristic``) gives the other
roles scripted policies by name (default: the env's ``default_policies``; entries for trained
roles are ignored). Evaluation plays
``eval_episodes`` games with the same opponents and reports the trained roles' success (for a
game: the win rate).
"""

from __future__ import annotations

from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.multiagent.policies import EnginePolicy
from agentgym.multiagent.rollout import play_games, role_episodes
from agentgym.multiagent.source import MultiAgentSource
from agentgym.recipes.report import EvalResult
from agentgym.registry.multiagent import multiagent_info

__all__ = ["evaluate_roles", "run_source", "train_roles"]


def train_roles(run: Any) -> tuple[str, ...]:
    """The run's trained roles: ``run.train_roles`` split on commas, else the env's first."""
    roles = multiagent_info(run.env).roles
    given = getattr(run, "train_roles", None)
    if not given:
        return roles[:1]
    chosen = tuple(r.strip() for r in str(given).split(",") if r.strip())
    unknown = [r for r in chosen if r not in roles]
    if unknown or not chosen:
        raise ConfigError("train_roles", given, f"names no role of {run.env}", f"use {roles}")
    return chosen


def _opponents(run: Any) -> dict[str, Any]:
    """``run.role_policies`` of the roles not trained (a recipe's opponent for a role that a
    flag then trains is dropped)."""
    trained = set(train_roles(run))
    given = dict(getattr(run, "role_policies", None) or {})
    return {role: policy for role, policy in given.items() if role not in trained}


def run_source(run: Any, engine: Any, world_size: int = 1) -> MultiAgentSource:
    """The ``EpisodeSource`` of a run on a multi-agent env (one process only)."""
    if world_size > 1:
        raise ConfigError(
            "env",
            run.env,
            "is a multi-agent env, trained in one process only for now",
            "train it without data-parallel ranks",
        )
    return MultiAgentSource(
        engine,
        run.env,
        train_roles=train_roles(run),
        policies=_opponents(run),
        group_size=run.config.group_size,
        seed=run.seed,
        env_kwargs={**run.env_kwargs, **run.train_env_kwargs},
        action_choices=run.action_choices,
        temperature=run.config.temperature,
        max_tokens=run.config.max_new_tokens,
    )


def evaluate_roles(run: Any, engine: Any, seed: int) -> EvalResult:
    """The trained roles' success over ``run.eval_episodes`` games (per role and game)."""
    roles = train_roles(run)
    policies = {**_opponents(run), **dict.fromkeys(roles, EnginePolicy(engine))}
    games = play_games(
        run.env,
        policies,
        run.eval_episodes,
        seed,
        env_kwargs=dict(run.env_kwargs),
        action_choices=run.action_choices,
        sampling_seed=seed,
        temperature=run.eval_temperature,
        max_tokens=run.config.max_new_tokens,
    )
    episodes = role_episodes(games, roles, 1)
    return EvalResult([(None, e.success, e.total_reward) for e in episodes])
