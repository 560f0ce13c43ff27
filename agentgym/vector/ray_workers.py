"""``RayEnv``: a registered env made and run in a Ray actor, anywhere on a Ray cluster.

``AgentVectorEnv.from_id(id, n, workers="ray")`` (or ``gym.make_vec(id, n,
vectorization_mode="vector_entry_point", workers="ray")``) puts its sub-envs in Ray actors:
``ceil(n / envs_per_actor)`` actors, CPU-only (``num_gpus=0``), placed with Ray's ``SPREAD``
strategy, each asking for the resources of its envs (the env's registration: ``resources=``,
e.g. ``{"num_cpus": 1}`` for a container per env; at least ``MIN_ACTOR_CPUS`` so that no actor
lands on a node that offers no CPU, such as a GPU head started with ``--num-cpus 0``). An actor
is an async actor: its envs' calls run concurrently on its event loop, a synchronous env's on a
thread of its own. ``RayEnv`` is the proxy the vector env drives, one per sub-env.

A Ray already initialised in this process is used as it is; otherwise
``ray.init(address=ray_address)``: ``"auto"`` or ``"host:6379"`` joins a cluster, ``"local"``
starts a private instance, ``None`` decides as Ray does (``RAY_ADDRESS``, then a cluster started
with ``ray start`` on this machine, else a new local instance). ``ray`` is imported only when a
pool is made, never by ``import agentgym``. The calls themselves go through
``agentgym.vector.ray_actor`` (the actor, and the batching of calls to it).

Isolation, as ``ProcessEnv``: an actor that dies gives every call in flight on it an
``InfraError`` (the vector env turns it into that env's ``infra_error``); the next reset of each
of its envs starts one fresh actor in its place and remakes the env there. A call cancelled by
its deadline is cancelled in the actor too, and that env alone is remade at its next reset.
Closing every proxy of a pool (the vector env's ``close``) closes the envs (their containers and
sandboxes) and kills the actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from agentgym.core.aio import deadline
from agentgym.core.env import AgentEnv, StepResult
from agentgym.core.errors import ConfigError, EnvStateError, InfraError
from agentgym.core.types import Action, Observation
from agentgym.extras import pip_install
from agentgym.vector.ray_actor import CLOSE_TIMEOUT, Dispatcher, EnvActor

__all__ = [
    "MIN_ACTOR_CPUS",
    "RAY_OPTIONS",
    "RayEnv",
    "RayPool",
    "env_resources",
    "ray_factories",
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
        if self.actors[index] is None:
            self.generations[index] += 1
            self._start(index)
        return self.actors[index], self.generations[index]

    def lost(self, slot: int, generation: int) -> None:
        """The actor of ``slot`` (that ``generation``) died: the next ``actor_of`` replaces it."""
        index = slot // self.envs_per_actor
        if self.generations[index] == generation and self.actors[index] is not None:
            _kill_all([self.actors[index]])
            self.actors[index] = None
            for other in self.slots_of(index):
                self._made.pop(other, None)

    def made(self, slot: int) -> Any:
        """The pending ``make`` of ``slot`` (taken once), or a fresh one."""
        actor, _ = self.actor_of(slot)
        ref = self._made.pop(slot, None)
        return ref if ref is not None else actor.make.remote(slot)

    def release(self, slot: int) -> None:
        """A proxy closed; when none is open, the actors are killed."""
        self.open_slots.discard(slot)
        if not self.open_slots:
            self.shutdown()

    def shutdown(self) -> None:
        _kill_all(self.actors)
        for index in range(len(self.actors)):
            self.actors[index] = None
        self._made.clear()

    def node_ids(self) -> list[str]:
        """The node of each live actor (for placement checks)."""
        ray = _ray()
        return ray.get([a.node_id.remote() for a in self.actors if a is not None])


class RayEnv(AgentEnv):
    """A proxy ``AgentEnv`` whose env lives in a Ray actor (see the module docstring).

    Args:
        pool: the ``RayPool`` of the vector env.
        slot: this env's slot in the pool.
        start_timeout: seconds the actor may take to start and make the env.
    """

    def __init__(self, pool: RayPool, slot: int, *, start_timeout: float = START_TIMEOUT) -> None:
        self.pool, self.slot, self.start_timeout = pool, slot, start_timeout
        self.env_id = pool.env_id
        self._generation = -1
        self._fresh = False  # whether the actor's env needs no remake before the next reset
        description = self._start()
        super().__init__(
            tools=description["tools"],
            tool_parser=description["tool_parser"],
            render_mode=description["render_mode"],
        )
        self.observation_space = description["observation_space"]
        self.action_space = description["action_space"]
        self.metadata = description["metadata"]  # type: ignore[misc]

    def _start(self) -> dict[str, Any]:
        ray = _ray()
        _, self._generation = self.pool.actor_of(self.slot)
        self.pool.open_slots.add(self.slot)
        try:
            description = ray.get(self.pool.made(self.slot), timeout=self.start_timeout)
        except Exception as error:
            self.pool.lost(self.slot, self._generation)
            raise InfraError(
                f"{self.env_id} could not be made in its Ray actor: {type(error).__name__}: "
                f"{error}"
            ) from error
        self._fresh = True
        return description  # type: ignore[no-any-return]

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        ray = _ray()
        actor, generation = self.pool.actor_of(self.slot)
        if generation != self._generation:
            raise InfraError(f"{self.env_id} Ray actor was replaced; reset the env")
        key = (self.slot // self.pool.envs_per_actor, generation)
        request_id, answer = self.pool.dispatcher.submit(
            actor, key, self.slot, method, args, kwargs
        )
        try:
            status, value = await answer
        except asyncio.CancelledError:  # a deadline: stop it there, remake this env at reset
            with contextlib.suppress(Exception):
                actor.cancel.remote(request_id)
            self._fresh = False
            raise
        except ray.exceptions.RayActorError as error:
            self.pool.lost(self.slot, generation)
            raise InfraError(f"{self.env_id} Ray actor died during {method}: {error}") from error
        except InfraError:
            raise
        except Exception as error:  # Ray could not deliver the call or its answer
            raise InfraError(f"{self.env_id} {method} through Ray failed: {error!r}") from error
        if status != "ok":
            raise InfraError(f"{self.env_id} {method} failed in its Ray actor: {value}")
        return value

    @property
    def actor_alive(self) -> bool:
        """Whether this env's actor is the one its env was made on."""
        index = self.slot // self.pool.envs_per_actor
        return self.pool.actors[index] is not None and self.pool.generations[index] == (
            self._generation
        )

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        if self.closed:
            raise EnvStateError(f"RayEnv({self.env_id!r}) was closed; make a new env")
        if not self._fresh or not self.actor_alive:
            await asyncio.to_thread(self._start)
        super().reset(seed=seed)
        result = await self._call("areset", seed=seed, options=options)
        return result  # type: ignore[no-any-return]

    async def astep(self, action: Action) -> StepResult:
        return await self._call("astep", action)  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        if self.actor_alive and self.slot in self.pool.open_slots:
            with contextlib.suppress(Exception):
                async with deadline(CLOSE_TIMEOUT, f"{self.env_id} close"):
                    actor, _ = self.pool.actor_of(self.slot)
                    await actor.drop.remote(self.slot)
        self.pool.release(self.slot)
        await super().aclose()
