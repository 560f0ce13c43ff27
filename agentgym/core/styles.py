"""The two env styles: async (``areset``/``astep``/``aclose``) and Gymnasium (``reset``/``step``).

An ``AgentEnv`` subclass implements either method of each pair; ``install_adapters`` (called from
``AgentEnv.__init_subclass__``) gives the class the other one:

- a class that defines ``areset`` gets a ``reset`` that runs *that class's* ``areset`` to
  completion (``run_sync``); likewise ``step`` from ``astep`` and ``close`` from ``aclose``;
- a class that defines ``reset`` gets an ``areset`` that runs *that class's* ``reset`` on the env's
  worker thread, so a slow synchronous env never blocks the event loop that drives its siblings;
  likewise ``astep`` from ``step`` and ``aclose`` from ``close``.

The wrappers also tell an env that guards its episodes (``AgentEnv``, see ``EpisodeGuard``) when
a reset ends and when a step starts and ends, so that the step-after-end guard is written once.

The adapters call the defining class's own method, never ``self.<method>``: a Gymnasium-style
subclass of an async env (``reset`` over an inherited ``areset``) then reaches the parent's async
code through ``super().reset()`` without the two adapters calling each other forever. The bases in
``AgentEnv`` only seed and mark state, so ``super().reset(seed=seed)`` and
``await super().areset(seed=seed)`` both seed ``np_random`` and return at once, from either style.

Each env gets one worker thread for its synchronous methods (created on first use), not a slot in
a shared pool: calls of one env keep their order and their thread (a sync env may hold
thread-bound resources), and 64 envs step side by side. A call that outlives its caller's deadline
keeps its thread busy; the vector env then rebuilds the env, and the stuck daemon thread cannot
keep the interpreter from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from agentgym.core.aio import run_sync
from agentgym.core.errors import EnvStateError

__all__ = [
    "PAIRS",
    "EpisodeGuard",
    "StyledEnv",
    "SyncWorker",
    "WorkerOwner",
    "install_adapters",
    "style_of",
]

T = TypeVar("T")

PAIRS: tuple[tuple[str, str], ...] = (("reset", "areset"), ("step", "astep"), ("close", "aclose"))
"""``(synchronous name, async name)`` of each method pair."""

_ADAPTER = "__agentgym_adapter__"
_WRAPPED = "__agentgym_wrapped__"
# Ids of the envs whose own async reset runs in this context (set by _wrap, read by
# _sync_adapter).
_IN_ARESET: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "agentgym_in_areset", default=frozenset()
)


class SyncWorker:
    """One daemon thread that runs an env's synchronous calls in order."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while (job := self._queue.get()) is not None:
            job()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the worker thread; cancelling the await abandons the call."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()

        def settle(ok: bool, value: Any) -> None:
            if future.done():  # the caller gave up (deadline or cancel)
                return
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        def job() -> None:
            try:
                result = context.run(fn, *args, **kwargs)
            except BaseException as error:  # handed to the awaiting caller, not lost here
                outcome: tuple[bool, Any] = (False, error)
            else:
                outcome = (True, result)
            # RuntimeError: the caller's loop closed meanwhile, so nobody is waiting.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, *outcome)

        self._queue.put(job)
        return await future

    def stop(self) -> None:
        """Let the thread end after the calls already queued."""
        self._queue.put(None)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


class WorkerOwner:
    """The worker-thread half of ``StyledEnv`` for an env class (``AgentEnv``,
    ``MultiAgentEnv``): one ``SyncWorker`` per env, made on first use, stopped at close."""

    _closed: bool

    def _sync_worker(self) -> SyncWorker:
        """The thread this env's synchronous methods run on when called through the async API."""
        worker = self.__dict__.get("_worker")
        if worker is None or not worker.alive:
            worker = SyncWorker(f"agentgym-env-{type(self).__name__}")
            self.__dict__["_worker"] = worker
        return worker

    def _mark_closed(self) -> None:
        self._closed = True
        worker = self.__dict__.pop("_worker", None)
        if worker is not None:
            worker.stop()


class StyledEnv(Protocol):
    """What the adapters use of an env; ``AgentEnv`` has it (this module sits below it)."""

    _last_observation: Any

    @property
    def closed(self) -> bool: ...

    def _sync_worker(self) -> SyncWorker: ...

    def _mark_closed(self) -> None: ...


class EpisodeGuard(StyledEnv, Protocol):
    """What the wrappers of a guarded env's own reset/step report to it (``AgentEnv`` has it)."""

    def _reset_ended(self, ok: bool) -> None:
        """The env's reset returned (``ok``) or raised."""

    def _step_starting(self) -> None:
        """Raise ``EnvStateError`` unless an episode is under way."""

    def _step_ended(self, result: Any) -> None:
        """The env's step returned ``result``, or raised or was cancelled (``result`` None)."""


def style_of(cls: type, base: type) -> dict[str, str | None]:
    """For each pair's sync name, which side ``cls`` implements: ``"sync"``, ``"async"`` (the
    most derived definition wins) or ``None`` (only ``base``'s, ``AgentEnv``'s defaults)."""
    styles: dict[str, str | None] = {}
    for sync_name, async_name in PAIRS:
        styles[sync_name] = None
        for klass in cls.__mro__:
            if klass is base or not issubclass(klass, base):
                break
            own = {n for n in (sync_name, async_name) if _defines(klass, n)}
            if own:
                styles[sync_name] = "async" if async_name in own else "sync"
                break
    return styles


def _defines(klass: type, name: str) -> bool:
    """Whether ``klass`` itself defines ``name`` (an adapter installed for it does not count)."""
    value = klass.__dict__.get(name)
    return value is not None and not getattr(value, _ADAPTER, False)


def install_adapters(cls: type, *, guard: bool = False) -> None:
    """Give ``cls`` the missing side of each pair it implements one side of. ``guard``: the
    class's instances are ``EpisodeGuard`` s, told about every reset and step."""
    for sync_name, async_name in PAIRS:
        has_sync, has_async = _defines(cls, sync_name), _defines(cls, async_name)
        for name, defined in ((sync_name, has_sync), (async_name, has_async)):
            if defined:
                setattr(cls, name, _wrap(cls.__dict__[name], name, guard))
        if has_async and not has_sync:
            setattr(cls, sync_name, _sync_adapter(cls, sync_name, async_name))
        elif has_sync and not has_async:
            setattr(cls, async_name, _async_adapter(cls, sync_name, async_name, guard))


def _mark(fn: Callable[..., Any]) -> Callable[..., Any]:
    setattr(fn, _ADAPTER, True)
    return fn


def _wrap(fn: Callable[..., Any], name: str, guard: bool) -> Callable[..., Any]:
    """A subclass's own reset/step kept as written, plus bookkeeping: the last observation (for
    ``render``), the episode guard's events, and, for ``areset``, that the env's async reset is
    running in this context."""
    if name in ("close", "aclose") or getattr(fn, _WRAPPED, False):
        return fn
    kind = "step" if name in ("step", "astep") else "reset"
    if name in ("areset", "astep"):

        @functools.wraps(fn)
        async def coroutine(self: Any, *args: Any, **kwargs: Any) -> Any:
            token = _IN_ARESET.set(_IN_ARESET.get() | {id(self)}) if name == "areset" else None
            try:
                _starting(self, kind, guard)
                try:
                    result = await fn(self, *args, **kwargs)
                except BaseException:
                    _ended(self, kind, guard, None, raised=True)
                    raise
                return _ended(self, kind, guard, result)
            finally:
                if token is not None:
                    _IN_ARESET.reset(token)

        wrapped: Callable[..., Any] = coroutine
    else:

        @functools.wraps(fn)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            _starting(self, kind, guard)
            try:
                result = fn(self, *args, **kwargs)
            except BaseException:
                _ended(self, kind, guard, None, raised=True)
                raise
            return _ended(self, kind, guard, result)

        wrapped = method
    setattr(wrapped, _WRAPPED, True)
    return wrapped


def _starting(env: EpisodeGuard, kind: str, guard: bool) -> None:
    if guard and kind == "step":
        env._step_starting()


def _ended(env: EpisodeGuard, kind: str, guard: bool, result: Any, *, raised: bool = False) -> Any:
    """Record what a reset or step returned (or that it raised) and hand the result on."""
    if isinstance(result, tuple) and result:
        env._last_observation = result[0]
    if guard and kind == "step":
        env._step_ended(None if raised else result)
    elif guard:
        env._reset_ended(not raised)
    return result


def _sync_adapter(cls: type, sync_name: str, async_name: str) -> Callable[..., Any]:
    def method(self: StyledEnv, *args: Any, **kwargs: Any) -> Any:
        if sync_name == "close" and self.closed:
            return None
        if sync_name == "reset" and id(self) in _IN_ARESET.get():
            raise EnvStateError(
                f"super().reset() inside an async reset reached {cls.__name__}.{async_name}, an "
                f"async method, from synchronous code on a running event loop. Fix: await "
                f"super().areset(seed=seed, options=options) to run {cls.__name__}'s reset"
            )
        coroutine: Coroutine[Any, Any, Any] = getattr(cls, async_name)(self, *args, **kwargs)
        try:
            return run_sync(coroutine)
        finally:
            if sync_name == "close":
                self._mark_closed()

    method.__name__ = method.__qualname__ = sync_name
    method.__doc__ = f"Run ``{cls.__name__}.{async_name}`` to completion (synchronous API)."
    return _mark(method)


def _async_adapter(
    cls: type, sync_name: str, async_name: str, guard: bool
) -> Callable[..., Any]:
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if sync_name == "close" and self.closed:
            return None
        fn = getattr(cls, sync_name)
        try:
            return await self._sync_worker().call(fn, self, *args, **kwargs)
        except asyncio.CancelledError:
            # The synchronous step runs on in its thread; the caller gave up on this episode.
            if guard and sync_name == "step":
                self._step_ended(None)
            raise
        finally:
            if sync_name == "close":
                self._mark_closed()

    method.__name__ = method.__qualname__ = async_name
    method.__doc__ = f"Run ``{cls.__name__}.{sync_name}`` on the env's worker thread (async API)."
    return _mark(method)
