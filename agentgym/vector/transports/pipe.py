"""``PipeTransport``: an env made and run in a child process of its own, over a pipe.

The child is forked from a ``forkserver`` (a clean, single-threaded process), makes
``gym.make(spec, **kwargs).unwrapped`` from the id's spec (its entry point must be importable
there) and answers ``reset``, ``step`` and ``close`` over a pipe; the parent awaits each answer
on its event loop without a thread.

A call cancelled by its deadline, a child that dies or a broken pipe kills the child and raises
``InfraError`` for that call; the next ``start`` forks a fresh child. The child exits when its
parent does (the pipe closes; on Linux also ``PR_SET_PDEATHSIG``), and ``close`` kills it if it
does not end in time. Exceptions of the env cross the pipe as their kind (``failure_of``), type
name and message.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import weakref
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym

from agentgym.core.aio import deadline
from agentgym.core.errors import InfraError
from agentgym.vector.proxy import CLOSE_TIMEOUT, Description, describe, failure_of, remote_error

__all__ = ["PipeTransport"]

KILL_TIMEOUT = 10.0


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):  # Linux only; elsewhere the pipe's EOF suffices
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _serve(conn: Connection, spec: Any, kwargs: dict[str, Any]) -> None:
    """The child: make the env, then answer ``(method, args, kwargs)`` requests until EOF."""
    _die_with_parent()
    import gymnasium as gym

    import agentgym  # noqa: F401  (registers the ids and plugins)

    try:
        env: Any = gym.make(spec, disable_env_checker=True, **kwargs).unwrapped
        conn.send(("ok", describe(env)))
    except BaseException as error:  # reported to the parent, which raises it there
        conn.send(("infra", f"{type(error).__name__}: {error}"))
        return
    while True:
        try:
            method, args, call_kwargs = conn.recv()
        except (EOFError, OSError):
            break
        try:
            result = getattr(env, method)(*args, **call_kwargs)
            conn.send(("ok", result))
        except BaseException as error:  # the env's failure is the caller's data
            conn.send((failure_of(error), f"{type(error).__name__}: {error}"))
        if method == "close":
            break


def _kill(process: Any) -> None:
    if process is not None and process.is_alive():
        with contextlib.suppress(OSError):
            os.kill(process.pid, signal.SIGKILL)
        process.join(timeout=KILL_TIMEOUT)


class PipeTransport:
    """A ``Transport`` to an env in a child process (see the module docstring).

    Args:
        env_id: a registered id (made in the child with ``gym.make``).
        kwargs: its constructor arguments (picklable).
        start_timeout: seconds the child may take to make the env.
    """

    def __init__(
        self, env_id: str, kwargs: dict[str, Any] | None = None, *, start_timeout: float = 60.0
    ) -> None:
        self.name = self.env_id = env_id
        self.env_kwargs, self.start_timeout = dict(kwargs or {}), start_timeout
        self._process: Any = None
        self._conn: Connection | None = None
        self._finalizer: Any = None

    @property
    def pid(self) -> int | None:
        """The child's process id (``None`` when none runs)."""
        alive = self._process is not None and self._process.is_alive()
        return self._process.pid if alive else None

    async def start(self) -> Description:
        if self._conn is not None:  # the old env may hold containers: close it, then kill
            with contextlib.suppress(Exception):
                async with deadline(CLOSE_TIMEOUT, f"{self.env_id} close"):
                    await self.close()
        self._stop()
        return await asyncio.to_thread(self._spawn)

    def _spawn(self) -> Description:
        context = multiprocessing.get_context("forkserver")
        parent, child = context.Pipe()
        spec = gym.spec(self.env_id)
        process = context.Process(target=_serve, args=(child, spec, self.env_kwargs), daemon=True)
        process.start()
        child.close()
        self._process, self._conn = process, parent
        self._finalizer = weakref.finalize(self, _kill, process)
        if not parent.poll(self.start_timeout):
            self._stop()
            raise InfraError(
                f"{self.env_id} worker process did not start in {self.start_timeout} s"
            )
        status, value = parent.recv()
        if status != "ok":
            self._stop()
            raise InfraError(f"{self.env_id} could not be made in its worker process: {value}")
        return value  # type: ignore[no-any-return]

    def _stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        _kill(self._process)
        self._process = self._conn = None

    def alive(self) -> bool:
        return self._conn is not None and self._process is not None and self._process.is_alive()

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._conn is None:
            raise InfraError(f"{self.env_id} worker process is gone (it died or timed out)")
        conn, loop = self._conn, asyncio.get_running_loop()
        fd = conn.fileno()  # removed from the loop before the pipe closes, never after
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, lambda: None if ready.done() else ready.set_result(None))
        try:
            try:
                conn.send((method, args, kwargs))
                await ready
                status, value = conn.recv()
            finally:
                loop.remove_reader(fd)
        except BaseException as error:  # cancelled (deadline), died, pipe broken: start afresh
            self._stop()
            if isinstance(error, EOFError | OSError):
                raise InfraError(f"{self.env_id} worker process died during {method}") from error
            raise
        if status != "ok":
            raise remote_error(status, f"{self.env_id} {method} in its worker process", value)
        return value

    async def close(self) -> None:
        try:
            if self._conn is not None:
                await self.call("close")
        finally:
            self._stop()
