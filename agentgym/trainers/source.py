"""``EpisodeSource``: where ``fit`` gets episodes. The rollout collector is one
(``agentgym.trainers.collector.CollectorSource``); a test's synthetic episodes, a replay buffer or a
remote fleet of actors are others."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from agentgym.core.types import Episode

__all__ = ["EpisodeSource"]


@runtime_checkable
class EpisodeSource(Protocol):
    """Where ``fit`` gets episodes: the rollout collector, or any stand-in."""

    def collect(self, num_groups: int) -> list[Episode]:
        """``num_groups`` groups of ``config.group_size`` episodes (each group's episodes share
        a task and lie next to each other), sampled with the current policy."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The source's position (task order, seeds): saved in every checkpoint."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a position ``state_dict`` returned."""
        ...
