"""Multi-agent text episodes: several roles, each driven by its own policy, in one episode.

- :mod:`agentgym.multiagent.core`: ``MultiAgentEnv``, PettingZoo's AEC shape for chat messages.
- :mod:`agentgym.multiagent.registry`: ``register``/``make`` (ids work with ``gymnasium.make``).
- :mod:`agentgym.multiagent.policies`: what drives a role (an engine, or a scripted player).
- :mod:`agentgym.multiagent.rollout`: per-role token-exact ``Episode``s of whole games.
- :mod:`agentgym.multiagent.source`: the ``EpisodeSource`` that trains a subset of the roles.

See docs/multiagent.md.
"""

from __future__ import annotations

from agentgym.multiagent.core import LastResult, MultiAgentEnv
from agentgym.multiagent.registry import is_multiagent, list_multiagent_envs, make, register

__all__ = [
    "LastResult",
    "MultiAgentEnv",
    "is_multiagent",
    "list_multiagent_envs",
    "make",
    "register",
]
