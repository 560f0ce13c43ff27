"""The servers behind one ``ServerPolicy``: their state, the event loop every call to them runs
on, and loading one version of the weights into one of them.

``ServerSet`` is the base of ``ServerPolicy``: ``routing.RoutedServers`` adds generation over
the servers (routing, health, take-back), ``policy.ServerPolicy`` the pushes to all of them. The
state they share is set here, in one ``__init__``, so a reader finds every field in one place.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agentgym.core.errors import ConfigError
from agentgym.inference.base import InferenceEngine
from agentgym.inference.routing import Router
from agentgym.trainers.group_sync import GroupSync, WeightSyncMismatch
from agentgym.trainers.weight_sync.engines import (
    RESUME_FIX,
    START_FIX,
    InferenceServerError,
    engine_url,
)

if TYPE_CHECKING:
    from torch import Tensor

    from agentgym.trainers.backends import Backend

__all__ = ["PushingTrainer", "ServerSet"]

T = TypeVar("T")


class PushingTrainer(Protocol):
    """What a ``ServerPolicy`` uses of its ``Trainer`` (a protocol: ``Trainer.step`` imports
    this package)."""

    step_count: int
    backend: Backend
    tokenizer: Any
    state: dict[str, Any]

    def attach_engine(self, engine: InferenceEngine | None) -> None: ...

    def push_weights(self) -> None: ...

    def _export_policy(self, directory: Path, weights: dict[str, Tensor]) -> None: ...


class ServerSet:
    """One server or several (``engine``) and what a ``ServerPolicy`` knows of them; the
    arguments are ``ServerPolicy``'s."""

    def __init__(
        self,
        engine: InferenceEngine | Sequence[InferenceEngine],
        trainer: PushingTrainer,
        weights_dir: str | os.PathLike[str],
        *,
        keep: int = 2,
        sync: GroupSync | None = None,
        probe_s: float = 1.0,
    ) -> None:
        engines = list(engine) if isinstance(engine, Sequence) else [engine]
        if not engines:
            raise ConfigError("engine", engines, "is an empty list", "pass one server or more")
        if keep < 1:
            raise ConfigError("keep", keep, "must be >= 1", "keep the newest 1 or 2")
        if sync is not None and not all(hasattr(e, "update_weights_from_group") for e in engines):
            raise ConfigError(
                "weight_sync",
                "group",
                f"needs servers speaking SGLang's native API, not {type(engines[0]).__name__}",
                'use --engine sglang, or weight_sync = "disk"',
            )
        self.engines, self.trainer, self.keep, self.sync = engines, trainer, keep, sync
        self.engine = engines[0]
        # one process group per server: a server that dies breaks its own group only
        self.syncs = [None if sync is None else sync.for_server(i) for i in range(len(engines))]
        self.weights_dir = Path(weights_dir)
        self.tokenizer = trainer.tokenizer
        """Renders prompts for the collector: the policy's own."""
        self.urls = [engine_url(e) for e in engines]
        self.url = ", ".join(self.urls)
        self.router = Router(self.urls)
        self.probe_s = probe_s
        self.lost = 0
        """Episode turns that failed because their server stopped answering."""
        self.version: int | None = None
        """The policy version the servers hold (None before the first push)."""
        self.pushed: set[int] = set()
        """Every version this trainer pushed."""
        # per server: its weight_version -> the trainer's
        self._versions: list[dict[int, int]] = [{} for _ in engines]
        self._current: tuple[int, Path] | None = None  # the newest version loaded, its folder
        self._errors: list[BaseException | None] = [None] * len(engines)
        self._loop: asyncio.AbstractEventLoop | None = None  # every server call runs on it
        self._thread: threading.Thread | None = None
        self._running = 0  # completions under way (on the loop)
        self._idle = asyncio.Event()  # no completion under way
        self._open = asyncio.Event()  # not held for a push
        self._loading = asyncio.Lock()  # a push, or a server taken back
        self._probes: dict[int, asyncio.Task[None]] = {}
        self._idle.set()
        self._open.set()
        self._closers: list[Callable[[], None]] = []

    async def _home(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this policy's loop (started on first use) and wait for it."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="agentgym-server-client", daemon=True
            )
            thread.start()
            self._loop, self._thread = loop, thread
        if asyncio.get_running_loop() is self._loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def _answers(self, index: int) -> bool:
        health = getattr(self.engines[index], "health", None)
        return True if health is None else bool(await health())

    async def _load(
        self, index: int, version: int, path: Path | None, weights: Mapping[str, Tensor]
    ) -> Any:
        """Have server ``index`` load ``path`` (or ``weights`` through its process group) as
        version ``version``; returns the number the server now reports."""
        from agentgym.inference.sglang import SGLangEngine

        engine, sync = self.engines[index], self.syncs[index]
        if isinstance(engine, SGLangEngine):
            # it names its next update weight_version + 1: the server then reports the
            # trainer's version itself, the number every rank maps
            engine.weight_version = version - 1
        try:
            if sync is not None:
                await sync.push(engine, weights)
            else:
                await engine.update_weights(path)
        except (ConfigError, WeightSyncMismatch):
            raise
        except Exception as error:
            fix = START_FIX if self.version is None else RESUME_FIX  # the first push: at start
            source = path if sync is None else f"a {sync.backend} process group"
            raise InferenceServerError(
                f"the inference server at {self.urls[index]} did not load the weights of update "
                f"{version} from {source}: {type(error).__name__}: {error}. Fix: {fix}."
            ) from error
        return getattr(engine, "weight_version", None)

    # --- closing -------------------------------------------------------------------------------

    def close_with(self, close: Callable[[], None]) -> None:
        """Call ``close()`` when this policy closes (e.g. stop the servers a run launched)."""
        self._closers.append(close)

    async def close(self) -> None:
        try:
            await self._close_engines()
        finally:
            for close in self._closers:
                await asyncio.to_thread(close)

    async def _close_engines(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            for engine in self.engines:
                await engine.close()
            return
        try:
            await self._home(self._stop_probes())
            for engine in self.engines:
                await self._home(engine.close())
        finally:
            self._loop = self._thread = None
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join)
            loop.close()

    async def _stop_probes(self) -> None:
        probes = list(self._probes.values())
        for probe in probes:
            probe.cancel()
        await asyncio.gather(*probes, return_exceptions=True)
