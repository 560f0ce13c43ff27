"""Multi-agent text episodes: several roles, each driven by its own policy, in one episode.

This package is the multi-agent part of the training library (the trainers' layer):

- :mod:`agentgym.multiagent.policies`: what drives a role (an engine, or a scripted player).
- :mod:`agentgym.multiagent.rollout`: per-role token-exact ``Episode``s of whole games.
- :mod:`agentgym.multiagent.source`: the ``EpisodeSource`` that trains a subset of the roles.
- :mod:`agentgym.multiagent.play`: a person plays some roles in a terminal (``agentgym play``).

The env contract and its registration live below, where every layer can use them, and are
re-exported here: ``MultiAgentEnv`` (:mod:`agentgym.core.multiagent`) and ``register``/``make``/
``list_multiagent_envs`` (:mod:`agentgym.registry.multiagent`). ``agentgym train``'s glue is
:mod:`agentgym.recipes.multiagent`. See docs/multiagent.md.
"""

from __future__ import annotations

from agentgym.core.multiagent import LastResult, MultiAgentEnv
from agentgym.registry.multiagent import is_multiagent, list_multiagent_envs, make, register

__all__ = [
    "LastResult",
    "MultiAgentEnv",
    "is_multiagent",
    "list_multiagent_envs",
    "make",
    "register",
]
