"""``RayEnv``: a registered env made and run in a Ray actor, anywhere on a Ray cluster.

``AgentVectorEnv.from_id(id, n, workers="ray")`` (or ``gym.make_vec(id, n,
vectorization_mode="vector_entry_point", workers="ray")``) puts its sub-envs in the actors of
one ``RayPool``, each sub-env a ``RayEnv``: a ``ProxyEnv`` over a ``RayTransport``
(``agentgym.vector.transports.ray``: placement, resources, batching, restarts). ``ray`` is
imported only when a pool is made, never by ``import agentgym``.

Isolation, as ``ProcessEnv``: an actor that dies ends the episode of every env whose call was in
flight on it with ``info["infra_error"]``; the next reset of each of its envs starts one fresh
actor in its place and remakes the env there. A call cancelled by its deadline is cancelled in
the actor too, and that env alone is remade at its next reset. Closing every ``RayEnv`` of a pool
(the vector env's ``close``) closes the envs (their containers and sandboxes) and kills the
actors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from agentgym.core.env import AgentEnv
from agentgym.vector.proxy import ProxyEnv
from agentgym.vector.transports.ray import START_TIMEOUT, RayPool, RayTransport

__all__ = ["RayEnv", "ray_factories"]


def ray_factories(
    env_id: str, env_kwargs: Mapping[str, Any], num_envs: int, options: Mapping[str, Any]
) -> list[Callable[[], AgentEnv]]:
    """One factory per sub-env of ``AgentVectorEnv.from_id(..., workers="ray")``, over one
    ``RayPool`` made now (its actors start at once). ``options``: ``ray_address``,
    ``envs_per_actor`` and ``ray_resources`` (see ``RayPool``)."""
    pool = RayPool(
        env_id,
        env_kwargs,
        num_envs,
        envs_per_actor=options.get("envs_per_actor"),
        resources=options.get("ray_resources"),
        address=options.get("ray_address"),
    )
    return [functools.partial(RayEnv, pool, slot) for slot in range(num_envs)]


class RayEnv(ProxyEnv):
    """A proxy ``AgentEnv`` whose env lives in a Ray actor (see the module docstring).

    Args:
        pool: the ``RayPool`` of the vector env.
        slot: this env's slot in the pool.
        start_timeout: seconds the actor may take to start and make the env.
    """

    transport: RayTransport

    def __init__(self, pool: RayPool, slot: int, *, start_timeout: float = START_TIMEOUT) -> None:
        self.pool, self.slot, self.env_id = pool, slot, pool.env_id
        super().__init__(RayTransport(pool, slot, start_timeout=start_timeout))

    @property
    def actor_alive(self) -> bool:
        """Whether this env's actor is the one its env was made on."""
        return self.transport.alive()
