"""``MultiAgentSource``: games of a multi-agent env as the ``EpisodeSource`` that ``fit`` trains.

The trained roles (``train_roles``) are played by the trainer's engine; every other role by
its own policy (a scripted opponent by default, the env's ``default_policies``). Only the
trained roles' episodes reach the trainer, so only their sampled tokens are trained: a role
that is not trained contributes nothing but its moves in the trained roles' conversations.

A collect call of ``G`` groups plays ``G / len(train_roles)`` groups of ``group_size`` games
and returns, per game group and trained role, that role's ``group_size`` episodes as one
group (GRPO compares a role's returns with the same role's). Game group ``j`` of the run resets
with seed ``seed + j`` and samples with seeds derived from ``(seed, j)``: like
``CollectorSource``, the position is one integer, saved in checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.inference.base import InferenceEngine
from agentgym.multiagent.policies import EnginePolicy, Policy
from agentgym.multiagent.rollout import play_games, role_episodes
from agentgym.registry.multiagent import make
from agentgym.rollout.source import SourceBase

__all__ = ["MultiAgentSource"]


class MultiAgentSource(SourceBase):
    """Episodes of ``train_roles`` in games of ``env``; see the module docstring.

    Args:
        engine: the trainer's engine; it plays every role in ``train_roles``.
        env: a multi-agent env id.
        train_roles: the roles whose episodes are returned (and trained).
        policies: the other roles' policies (a scripted policy name, a callable, or an
            ``EnginePolicy`` of another engine); roles left out get the env's defaults.
        group_size: episodes per group.
        seed: base of the reset seeds and sampling seeds.
        env_kwargs: the env's constructor arguments.
        system: a role prompt put before the env's messages to each trained role.
        action_choices: constrained decoding among the env's ``info["action_choices"]``.
        sampling: ``SamplingParams`` fields (``temperature``, ``max_tokens``, ...).
    """

    def __init__(
        self,
        engine: InferenceEngine,
        env: str,
        *,
        train_roles: Sequence[str],
        policies: Mapping[str, Policy | str | Any] | None = None,
        group_size: int,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
        system: str | None = None,
        action_choices: bool = False,
        **sampling: Any,
    ) -> None:
        self.env = env
        self.env_kwargs = dict(env_kwargs or {})
        probe = make(env, **self.env_kwargs)
        roles = tuple(probe.possible_agents)
        probe.close()
        train = tuple(dict.fromkeys(train_roles))
        if not train or set(train) - set(roles):
            raise ConfigError(
                "train_roles", list(train_roles), f"must be roles of {env}", f"use some of {roles}"
            )
        others = dict(policies or {})
        clash = set(others) & set(train)
        if clash:
            raise ConfigError(
                "policies",
                sorted(clash),
                "are trained roles: the trainer's engine plays them",
                "give policies only for the roles that are not trained",
            )
        self.roles, self.train_roles = roles, train
        self.others = others
        self.system = system
        self._engine = engine
        self.group_size, self.seed = group_size, seed
        self.action_choices = action_choices
        self.sampling = sampling
        self.position = 0
        """Game groups played so far: the next one resets with seed ``seed + position``."""
        self.seen_tasks: set[str] = set()

    @property
    def engine(self) -> InferenceEngine:
        return self._engine

    @engine.setter
    def engine(self, engine: InferenceEngine) -> None:  # fit swaps in a weight-synced server
        self._engine = engine

    def policies(self) -> dict[str, Any]:
        """Role -> policy of the next games."""
        trained = EnginePolicy(self._engine, system=self.system)
        return {**self.others, **dict.fromkeys(self.train_roles, trained)}

    def collect(self, num_groups: int) -> list[Episode]:
        """``num_groups`` groups: ``num_groups / len(train_roles)`` game groups, each giving
        a group per trained role."""
        per_game = len(self.train_roles)
        if num_groups % per_game:
            raise ConfigError(
                "groups_per_batch",
                num_groups,
                f"is not a multiple of the {per_game} trained roles (each game group gives one "
                "group per trained role)",
                f"make batch_size / group_size a multiple of {per_game}",
            )
        game_groups = num_groups // per_game
        games = play_games(
            self.env,
            self.policies(),
            game_groups * self.group_size,
            self.seed + self.position,
            group_size=self.group_size,
            env_kwargs=self.env_kwargs,
            action_choices=self.action_choices,
            sampling_seed=self.seed * 1_000_003 + self.position,
            **self.sampling,
        )
        self.position += game_groups
        return role_episodes(games, self.train_roles, self.group_size)

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "position": self.position, "train_roles": list(self.train_roles)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        roles = tuple(state.get("train_roles", self.train_roles))
        if roles != self.train_roles:
            raise ConfigError(
                "train_roles",
                list(self.train_roles),
                f"differs from the checkpoint's {list(roles)}",
                "resume with the run's train_roles",
            )
        self.seed, self.position = int(state["seed"]), int(state["position"])
