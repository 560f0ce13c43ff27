"""The Ray side of ``RayTransport``: ``EnvActor`` (envs by slot in one async actor) and
``Dispatcher`` (the driver's batching of calls to it).

A Ray call costs the driver about a millisecond of CPU on a busy machine; a lockstep step of 256
envs would pay it 256 times. The dispatcher sends the calls submitted to one actor in the same
turn of the event loop as one streaming call, ``EnvActor.run``, which runs them concurrently
and yields each result as soon as it is ready (those finished at the same moment together), so
a slow env never holds back another's transition (the ragged API's completion order holds).
A caller cancelled by its deadline cancels its request in the actor (``EnvActor.cancel``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import gymnasium as gym

from agentgym.core.aio import deadline
from agentgym.core.env import AgentEnv
from agentgym.core.errors import InfraError
from agentgym.vector.proxy import CLOSE_TIMEOUT, Description, describe, failure_of

__all__ = ["Dispatcher", "EnvActor"]
# A message per result costs the driver ~0.3 ms of CPU; results finishing within this many
# seconds of each other share one (a latency of at most this much for the first of them).
COALESCE_S = 0.002
Request = tuple[int, int, str, tuple[Any, ...], dict[str, Any]]  # id, slot, method, args, kwargs
# id, "ok" or the failure's kind (``failure_of``), the result or the error's "Type: message"
Outcome = tuple[int, str, Any]


class EnvActor:
    """The Ray actor (made with ``ray.remote`` at run time): envs by slot, made on demand."""

    def __init__(self, spec: Any, kwargs: dict[str, Any]) -> None:
        import agentgym  # noqa: F401  (registers the ids and plugins)

        self.spec, self.kwargs = spec, kwargs
        self.envs: dict[int, AgentEnv] = {}
        self.running: dict[int, asyncio.Task[Any]] = {}

    async def make(self, slot: int) -> Description:
        """Make (or remake) the env of ``slot``; returns what the proxy needs to mirror it."""
        await self.drop(slot)

        def make() -> Any:
            return gym.make(self.spec, disable_env_checker=True, **self.kwargs).unwrapped

        env: AgentEnv = await asyncio.to_thread(make)
        self.envs[slot] = env
        return describe(env)

    async def _call(self, slot: int, method: str, args: Any, kwargs: Any) -> Any:
        env = self.envs.get(slot)
        if env is None:
            raise InfraError(f"slot {slot} has no env in this actor (it was dropped)")
        return await getattr(env, method)(*args, **kwargs)

    async def run(self, requests: list[Request]) -> AsyncIterator[list[Outcome]]:
        """Run ``requests`` concurrently; yield outcomes as they finish."""
        ids: dict[asyncio.Task[Any], int] = {}
        for request_id, slot, method, args, kwargs in requests:
            task = asyncio.ensure_future(self._call(slot, method, args, kwargs))
            ids[task] = request_id
            self.running[request_id] = task
        pending = set(ids)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if pending:  # those finishing within COALESCE_S go in the same message
                more, pending = await asyncio.wait(pending, timeout=COALESCE_S)
                done |= more
            yield [self._outcome(ids[task], task) for task in done]

    def _outcome(self, request_id: int, task: asyncio.Task[Any]) -> Outcome:
        self.running.pop(request_id, None)
        if task.cancelled():
            return request_id, "infra", "CancelledError: cancelled by the caller's deadline"
        error = task.exception()
        if error is not None:
            return request_id, failure_of(error), f"{type(error).__name__}: {error}"
        return request_id, "ok", task.result()

    def cancel(self, request_id: int) -> None:
        task = self.running.get(request_id)
        if task is not None:
            task.cancel()

    async def drop(self, slot: int) -> None:
        """Close and forget the env of ``slot`` (if any)."""
        env = self.envs.pop(slot, None)
        if env is not None and not env.closed:
            with contextlib.suppress(Exception):
                async with deadline(CLOSE_TIMEOUT, f"slot {slot} close"):
                    await env.aclose()

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())


class Dispatcher:
    """Batches the calls to each actor submitted in one turn of the caller's event loop."""

    def __init__(self) -> None:
        self._ids = itertools.count()
        self._queues: dict[tuple[Any, asyncio.AbstractEventLoop], list[Request]] = {}
        self._futures: dict[int, asyncio.Future[tuple[str, Any]]] = {}
        self._drains: set[asyncio.Task[None]] = set()

    def submit(
        self, actor: Any, key: Any, slot: int, method: str, args: Any, kwargs: Any
    ) -> tuple[int, asyncio.Future[tuple[str, Any]]]:
        """Queue a call of ``actor`` (``key`` names it and its generation); ``(id, future of
        (status, value))``. The future fails with Ray's error when the actor dies."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[str, Any]] = loop.create_future()
        request_id = next(self._ids)
        self._futures[request_id] = future
        queue = self._queues.get((key, loop))
        if queue is None:
            queue = self._queues[(key, loop)] = []
            loop.call_soon(self._flush, key, loop, actor)
        queue.append((request_id, slot, method, args, kwargs))
        return request_id, future

    def _flush(self, key: Any, loop: asyncio.AbstractEventLoop, actor: Any) -> None:
        requests = self._queues.pop((key, loop))
        try:
            stream = actor.run.options(num_returns="streaming").remote(requests)
        except Exception as error:  # the handle is unusable (Ray shut down)
            self._fail([r[0] for r in requests], error)
            return
        drain = loop.create_task(self._drain(stream, [r[0] for r in requests]))
        self._drains.add(drain)
        drain.add_done_callback(self._drains.discard)

    async def _drain(self, stream: Any, request_ids: list[int]) -> None:
        try:
            async for ref in stream:
                for request_id, status, value in await ref:
                    future = self._futures.pop(request_id, None)
                    if future is not None and not future.done():
                        future.set_result((status, value))
        except Exception as error:  # the actor died (RayActorError) or the stream broke
            self._fail(request_ids, error)
        self._fail(request_ids, InfraError("the Ray actor's stream ended without an answer"))

    def _fail(self, request_ids: list[int], error: BaseException) -> None:
        for request_id in request_ids:
            future = self._futures.pop(request_id, None)
            if future is not None and not future.done():
                future.set_exception(error)
