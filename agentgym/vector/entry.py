"""Vector entry points for registered ids.

Gymnasium's ``make_vec(..., vectorization_mode="vector_entry_point")`` calls the spec's
``vector_entry_point`` with ``num_envs`` and the env kwargs, but not the id. Registering a partial
would make the spec unserialisable (``EnvSpec.to_json`` rejects callables), so each id's vector
entry point is the string ``"agentgym.vector.entry:<id>"`` and this module resolves any attribute
name to a factory for that id.
"""

from __future__ import annotations

import functools
from typing import Any


def make_vector_env(env_id: str, /, num_envs: int = 1, **kwargs: Any) -> Any:
    """``num_envs`` envs of ``env_id``; ``kwargs`` may hold the env's own ``env_id`` argument
    (``agentgym/Remote-v0``): this one is positional-only."""
    from agentgym.vector.env import AgentVectorEnv

    return AgentVectorEnv.from_id(env_id, num_envs=num_envs, **kwargs)


def __getattr__(env_id: str) -> Any:
    if env_id.startswith("__"):
        raise AttributeError(env_id)
    return functools.partial(make_vector_env, env_id)
