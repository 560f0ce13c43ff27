"""Ragged work in flight, and the transitions it produced in completion order."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from agentgym.core.errors import EnvStateError
from agentgym.vector.runner import Transition

__all__ = ["Inbox"]

Job = Callable[[], Coroutine[Any, Any, Transition]]


class Inbox:
    """Starts submitted jobs as tasks and hands out their transitions as they finish.

    A job submitted while no event loop runs (synchronous code) starts at the next ``get``, on
    that call's loop.
    """

    def __init__(self) -> None:
        self._deferred: list[Job] = []
        self._running: set[asyncio.Task[Transition]] = set()
        self._finished: deque[asyncio.Task[Transition]] = deque()
        self._waiters: list[asyncio.Future[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # where the running tasks run

    def __len__(self) -> int:
        """Submitted transitions not yet received."""
        return len(self._deferred) + len(self._running) + len(self._finished)

    def check_loop(self) -> None:
        """``EnvStateError`` if work is running on an event loop other than the running one."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._running and loop is not self._loop:
            raise EnvStateError(
                "ragged work is pending on another event loop: receive it there first"
            )

    def submit(self, job: Job) -> None:
        """Start ``job`` now on the running loop, or at the next ``get`` if none runs."""
        self.check_loop()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._deferred.append(job)
            return
        self._start(loop, job)

    def _start(self, loop: asyncio.AbstractEventLoop, job: Job) -> None:
        self._loop = loop
        task = loop.create_task(job())
        self._running.add(task)
        task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[Transition]) -> None:
        self._running.discard(task)
        if not task.cancelled():  # cancelled work (its loop shut down) has no transition
            self._finished.append(task)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def get(self) -> Transition:
        """The next finished transition, waiting for one if none is ready."""
        self.check_loop()
        loop = asyncio.get_running_loop()
        deferred, self._deferred = self._deferred, []
        for job in deferred:
            self._start(loop, job)
        while not self._finished:
            if not self._running:
                raise EnvStateError(
                    "nothing to receive: submit work first with submit_step or submit_reset"
                )
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                self._waiters.remove(waiter)
        return self._finished.popleft().result()

    def cancel(self) -> list[asyncio.Task[Transition]]:
        """Drop everything pending; returns the tasks that were still running (now cancelled)."""
        running = list(self._running)
        for task in running:
            task.remove_done_callback(self._on_done)
            task.cancel()
        self._deferred.clear()
        self._running.clear()
        self._finished.clear()
        return running
