"""Async written once, adapted to sync once.

``run_sync(coro)`` runs a coroutine to completion from synchronous code. Each thread gets one
long-lived event loop, so resources an env opened on it (subprocesses, sockets, server sessions)
stay usable across ``reset``/``step`` calls. When the calling thread already runs a loop (a
notebook, an async framework), the coroutine runs on a dedicated helper thread's loop instead of
failing with "event loop is already running".

``deadline(seconds, what)`` is a timeout scope that raises ``DeadlineExceeded``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

from agentgym.core.errors import DeadlineExceeded

__all__ = ["deadline", "run_sync"]

T = TypeVar("T")

_local = threading.local()
_helper_lock = threading.Lock()
_helper_loop: asyncio.AbstractEventLoop | None = None


class _ThreadLoop:
    """A thread's loop, closed when the thread ends and ``threading.local`` drops this holder
    (otherwise every thread that ever ran ``run_sync`` leaks the loop's selector and sockets)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()

    def __del__(self) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Cancel the loop's leftover tasks (e.g. an engine's worker), let them finish, close.

        A forked child inherits the parent's epoll instance: closing the loop there would
        unregister the parent's descriptors, so only the process that made it closes it.
        """
        loop = self.loop
        if self.pid != os.getpid() or loop.is_running() or loop.is_closed():
            return
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _thread_loop() -> asyncio.AbstractEventLoop:
    holder: _ThreadLoop | None = getattr(_local, "holder", None)
    if holder is None or holder.loop.is_closed() or holder.pid != os.getpid():
        holder = _ThreadLoop()
        _local.holder = holder
        if threading.current_thread() is threading.main_thread():
            # The main thread's holder lives until interpreter exit, after asyncio would warn
            # "Task was destroyed but it is pending" about tasks still parked on it.
            atexit.register(holder.shutdown)
    return holder.loop


def _forget_helper_after_fork() -> None:
    # The helper thread does not exist in a forked child; start a fresh one on demand.
    global _helper_loop, _helper_lock
    _helper_loop, _helper_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_helper_after_fork)


def _helper() -> asyncio.AbstractEventLoop:
    global _helper_loop
    with _helper_lock:
        if _helper_loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="agentgym-sync", daemon=True).start()
            _helper_loop = loop
        return _helper_loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result, from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _thread_loop().run_until_complete(coro)
    return asyncio.run_coroutine_threadsafe(coro, _helper()).result()


@contextlib.asynccontextmanager
async def deadline(seconds: float | None, what: str) -> AsyncIterator[None]:
    """Raise ``DeadlineExceeded(what, seconds)`` if the body runs longer than ``seconds``."""
    if seconds is None:
        yield
        return
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            yield
    except TimeoutError as e:
        if scope.expired():
            raise DeadlineExceeded(what, seconds) from e
        raise
