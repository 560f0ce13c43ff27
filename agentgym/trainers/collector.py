"""``CollectorSource``: the rollout collector as the ``EpisodeSource`` that ``fit`` trains from.

Group ``j`` of the run (counted from the first collect call) plays the task of reset seed
``seed + j`` and samples with seeds derived from ``(seed, j)``, so the position is one integer:
a checkpoint stores it and a resumed run collects exactly the episodes the killed one would
have. The tasks played are remembered (``seen_tasks``) so that an evaluation can hold out tasks
the policy never trained on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentgym.core.info import TASK_ID
from agentgym.core.types import Episode
from agentgym.inference.base import InferenceEngine
from agentgym.rollout import collect
from agentgym.vector import AgentVectorEnv

__all__ = ["CollectorSource", "episode_task"]


def episode_task(episode: Episode) -> str | None:
    """The task an episode played (``info["task_id"]`` on reset), when its env reports one."""
    value = episode.reset_info.get(TASK_ID)
    return None if value is None else str(value)


class CollectorSource:
    """Episodes of ``env`` sampled by ``engine``, ``group_size`` per task.

    Args:
        engine: the inference engine the trainer pushes its weights to.
        env: an env id (a vector env is made per collect call) or an ``AgentVectorEnv``.
        group_size: episodes per task (``config.group_size``).
        seed: base of the reset seeds and sampling seeds.
        env_kwargs: the env's constructor arguments (env ids only).
        max_turns: most turns per episode; None: the env's own limit.
        history_turns: the policy's history window; None: the whole conversation.
        action_choices: constrained decoding among the env's ``info["action_choices"]``.
        sampling: ``SamplingParams`` fields (``temperature``, ``max_tokens``, ...).
    """

    def __init__(
        self,
        engine: InferenceEngine,
        env: str | AgentVectorEnv,
        *,
        group_size: int,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
        max_turns: int | None = None,
        history_turns: int | None = None,
        action_choices: bool = False,
        **sampling: Any,
    ) -> None:
        self.engine, self.env = engine, env
        self.group_size, self.seed = group_size, seed
        self.env_kwargs = dict(env_kwargs or {})
        self.max_turns = max_turns
        self.history_turns = history_turns
        self.action_choices = action_choices
        self.sampling = sampling
        self.position = 0
        """Groups collected so far: the next group plays reset seed ``seed + position``."""
        self.seen_tasks: set[str] = set()

    def collect(self, num_groups: int) -> list[Episode]:
        is_id = isinstance(self.env, str)
        episodes = collect(
            self.engine,
            self.env,
            num_groups * self.group_size,
            self.seed + self.position,
            group_size=self.group_size,
            max_turns=self.max_turns,
            history_turns=self.history_turns,
            action_choices=self.action_choices,
            env_kwargs=self.env_kwargs if is_id else None,
            num_envs=num_groups * self.group_size if is_id else None,
            sampling_seed=self.seed * 1_000_003 + self.position,
            **self.sampling,
        )
        self.position += num_groups
        self.seen_tasks.update(t for t in map(episode_task, episodes) if t is not None)
        return episodes

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "position": self.position, "seen_tasks": sorted(self.seen_tasks)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.seed, self.position = int(state["seed"]), int(state["position"])
        self.seen_tasks = set(state.get("seen_tasks", ()))
