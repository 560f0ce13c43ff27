"""``RayTransport``: an env made and run in a Ray actor, anywhere on a Ray cluster.

A ``RayPool`` holds the actors of one vector env (``AgentVectorEnv.from_id(id, n,
workers="ray")``, see ``agentgym.vector.ray_workers``): ``ceil(n / envs_per_actor)`` actors,
CPU-only (``num_gpus=0``), placed with Ray's ``SPREAD`` strategy, each asking for the resources
of its envs (the env's registration: ``resources=``, e.g. ``{"num_cpus": 1}`` for a container
per env; at least ``MIN_ACTOR_CPUS`` so that no actor lands on a node that offers no CPU, such as
a GPU head started with ``--num-cpus 0``). An actor is an async actor: its envs' calls run
concurrently on its event loop, a synchronous env's on a thread of its own. A ``RayTransport``
reaches one slot of the pool.

A Ray already initialised in this process is used as it is; otherwise
``ray.init(address=ray_address)``: ``"auto"`` or ``"host:6379"`` joins a cluster, ``"local"``
starts a private instance, ``None`` decides as Ray does (``RAY_ADDRESS``, then a cluster started
with ``ray start`` on this machine, else a new local instance). ``ray`` is imported only when a
pool is made, never by ``import agentgym``. The calls themselves go through
``agentgym.vector.transports.ray_actor`` (the actor, and the batching of calls to it).

Isolation: an actor that dies gives every call in flight on it an ``InfraError``; the next
``start`` of each of its envs starts one fresh actor in its place and remakes the env there. A
call cancelled by its deadline is cancelled in the actor too. Closing every transport of a pool
(the vector env's ``close``) closes the envs (their containers and sandboxes) and kills the
actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from agentgym.core.errors import ConfigError, InfraError
from agentgym.extras import pip_install
from agentgym.vector.proxy import Description, remote_error
from agentgym.vector.transports.ray_actor import Dispatcher, EnvActor

__all__ = [
    "MIN_ACTOR_CPUS",
    "RAY_OPTIONS",
    "RayPool",
    "RayTransport",
    "env_resources",
]

log = logging.getLogger("agentgym.vector")

START_TIMEOUT = 120.0
MIN_ACTOR_CPUS = 0.1
LIGHT_ENVS_PER_ACTOR = 16
RAY_OPTIONS = ("ray_address", "envs_per_actor", "ray_resources")


def _ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise ConfigError(
            "workers", "ray", "needs the ray package", pip_install("ray")
        ) from error
    return ray


def env_resources(env_id: str) -> tuple[dict[str, float], int]:
    """``(resources per env, envs per actor)`` from the env's registration.

    Envs registered without ``resources`` (or with other ``gym.register`` calls) are light:
    no resources of their own and ``LIGHT_ENVS_PER_ACTOR`` per actor. An env that asks for a
    whole CPU or more gets an actor to itself unless its registration says otherwise.
    """
    from agentgym.registry import _ENVS

    info = _ENVS.get(env_id)
    resources = dict(getattr(info, "resources", None) or {})
    per_actor = getattr(info, "envs_per_actor", None)
    if per_actor is None:
        per_actor = 1 if resources.get("num_cpus", 0) >= 1 else LIGHT_ENVS_PER_ACTOR
    return resources, per_actor


@functools.cache
def _actor_class() -> Any:
    return _ray().remote(EnvActor)


def _kill_all(actors: list[Any]) -> None:
    ray = _ray()
    if not ray.is_initialized():
        return
    for actor in actors:
        if actor is not None:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)


class RayPool:
    """The actors of one vector env: slot ``i`` lives on actor ``i // envs_per_actor``.

    Args:
        env_id: a registered id, made in the actors with ``gym.make``.
        kwargs: its constructor arguments (picklable).
        num_envs: slots in the pool.
        envs_per_actor: envs per actor (``None``: the registration's, see ``env_resources``).
        resources: Ray resources per env (``None``: the registration's); ``num_cpus``,
            ``memory`` and custom resources are summed over an actor's envs.
        address: the Ray cluster to join when Ray is not initialised yet (``None``: a local one).
    """

    def __init__(
        self,
        env_id: str,
        kwargs: Mapping[str, Any],
        num_envs: int,
        *,
        envs_per_actor: int | None = None,
        resources: Mapping[str, float] | None = None,
        address: str | None = None,
    ) -> None:
        declared, per_actor = env_resources(env_id)
        self.envs_per_actor = per_actor if envs_per_actor is None else envs_per_actor
        if isinstance(self.envs_per_actor, bool) or not isinstance(self.envs_per_actor, int) or (
            self.envs_per_actor < 1
        ):
            raise ConfigError(
                "envs_per_actor", envs_per_actor, "must be an int >= 1", "pass e.g. 1 or 16"
            )
        self.resources = dict(declared if resources is None else resources)
        self.env_id, self.kwargs, self.num_envs = env_id, dict(kwargs), num_envs
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
        self._spec = gym.spec(env_id)
        count = math.ceil(num_envs / self.envs_per_actor)
        self.actors: list[Any] = [None] * count
        self.generations = [0] * count
        self.open_slots: set[int] = set()
        self._made: dict[int, Any] = {}
        self.dispatcher = Dispatcher()
        # The envs of a dead actor start again at once, each from a thread (``start``): one
        # replacement for them all.
        self._lock = threading.RLock()
        self._finalizer = weakref.finalize(self, _kill_all, self.actors)
        for index in range(count):
            self._start(index)

    def _options(self, envs: int) -> dict[str, Any]:
        total = {k: float(v) * envs for k, v in self.resources.items()}
        options: dict[str, Any] = {
            "num_cpus": max(total.pop("num_cpus", 0.0), MIN_ACTOR_CPUS),
            "num_gpus": 0,
            "scheduling_strategy": "SPREAD",
            "max_restarts": 0,
            "max_concurrency": max(envs * 4, 16),
        }
        if "memory" in total:
            options["memory"] = total.pop("memory")
        total.pop("num_gpus", None)
        if total:
            options["resources"] = total
        return options

    def _start(self, index: int) -> None:
        """Start actor ``index`` and ask it for its envs at once (they start in parallel)."""
        slots = self.slots_of(index)
        remote = _actor_class().options(**self._options(len(slots)))
        actor = remote.remote(self._spec, self.kwargs)
        self.actors[index] = actor
        for slot in slots:
            self._made[slot] = actor.make.remote(slot)

    def slots_of(self, index: int) -> range:
        start = index * self.envs_per_actor
        return range(start, min(start + self.envs_per_actor, self.num_envs))

    def actor_of(self, slot: int) -> tuple[Any, int]:
        """``(actor handle, its generation)`` for ``slot``; starts a replacement if needed."""
        index = slot // self.envs_per_actor
        with self._lock:
            if self.actors[index] is None:
                self.generations[index] += 1
                self._start(index)
            return self.actors[index], self.generations[index]

    def lost(self, slot: int, generation: int) -> None:
        """The actor of ``slot`` (that ``generation``) died: the next ``actor_of`` replaces it."""
        index = slot // self.envs_per_actor
        with self._lock:
            if self.generations[index] == generation and self.actors[index] is not None:
                _kill_all([self.actors[index]])
                self.actors[index] = None
                for other in self.slots_of(index):
                    self._made.pop(other, None)

    def made(self, slot: int) -> tuple[Any, int]:
        """``(the pending make of slot (taken once) or a fresh one, the actor's generation)``;
        the slot counts as open until ``release``."""
        with self._lock:
            actor, generation = self.actor_of(slot)
            self.open_slots.add(slot)
            ref = self._made.pop(slot, None)
            return (ref if ref is not None else actor.make.remote(slot)), generation

    def release(self, slot: int) -> None:
        """A proxy closed; when none is open, the actors are killed."""
        with self._lock:
            self.open_slots.discard(slot)
            if not self.open_slots:
                self.shutdown()

    def shutdown(self) -> None:
        with self._lock:
            _kill_all(self.actors)
            for index in range(len(self.actors)):
                self.actors[index] = None
            self._made.clear()

    def node_ids(self) -> list[str]:
        """The node of each live actor (for placement checks)."""
        ray = _ray()
        return ray.get([a.node_id.remote() for a in self.actors if a is not None])


class RayTransport:
    """A ``Transport`` to the env of ``slot`` in ``pool`` (see the module docstring).

    Args:
        pool: the ``RayPool`` of the vector env.
        slot: this env's slot in the pool.
        start_timeout: seconds the actor may take to start and make the env.
    """

    def __init__(self, pool: RayPool, slot: int, *, start_timeout: float = START_TIMEOUT) -> None:
        self.pool, self.slot, self.start_timeout = pool, slot, start_timeout
        self.name = pool.env_id
        self._generation = -1

    async def start(self) -> Description:
        return await asyncio.to_thread(self._start)

    def _start(self) -> Description:
        ray = _ray()
        made, self._generation = self.pool.made(self.slot)
        try:
            description = ray.get(made, timeout=self.start_timeout)
        except Exception as error:
            self.pool.lost(self.slot, self._generation)
            raise InfraError(
                f"{self.name} could not be made in its Ray actor: {type(error).__name__}: "
                f"{error}"
            ) from error
        return description  # type: ignore[no-any-return]

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        ray = _ray()
        if not self.alive():  # its actor died or the pool was shut down; start() replaces it
            raise InfraError(f"{self.name} Ray actor is gone or was replaced; reset the env")
        index = self.slot // self.pool.envs_per_actor
        actor, generation = self.pool.actors[index], self._generation
        key = (index, generation)
        request_id, answer = self.pool.dispatcher.submit(
            actor, key, self.slot, f"a{method}", args, kwargs
        )
        try:
            status, value = await answer
        except asyncio.CancelledError:  # a deadline: stop it there (the proxy remakes the env)
            with contextlib.suppress(Exception):
                actor.cancel.remote(request_id)
            raise
        except ray.exceptions.RayActorError as error:
            self.pool.lost(self.slot, generation)
            raise InfraError(f"{self.name} Ray actor died during {method}: {error}") from error
        except InfraError:
            raise
        except Exception as error:  # Ray could not deliver the call or its answer
            raise InfraError(f"{self.name} {method} through Ray failed: {error!r}") from error
        if status != "ok":
            raise remote_error(status, f"{self.name} {method} in its Ray actor", value)
        return value

    def alive(self) -> bool:
        """Whether this env's actor is the one its env was made on."""
        index = self.slot // self.pool.envs_per_actor
        return self.pool.actors[index] is not None and self.pool.generations[index] == (
            self._generation
        )

    async def close(self) -> None:
        try:
            if self.alive() and self.slot in self.pool.open_slots:
                await self.pool.actors[self.slot // self.pool.envs_per_actor].drop.remote(self.slot)
        finally:
            self.pool.release(self.slot)
