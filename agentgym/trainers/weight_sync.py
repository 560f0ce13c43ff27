"""Weights to an inference server by disk, and the policy version of every sample.

An engine in the trainer's process (``HFEngine``, placed by ``colocate``) gets the policy's
tensors after each update. A server (SGLang, or ``agentgym serve``, which speaks SGLang's native
API) cannot: ``attach_server`` wraps its engine in a ``ServerPolicy`` that, at each push,

1. writes the policy (``Trainer.policy_state_dict()``: LoRA merged, ZeRO-3 gathered) as a
   transformers model directory of safetensors, ``<weights_dir>/step-<n>``, atomically (a
   temporary folder renamed), keeping the newest ``keep`` of them;
2. has the server load it (``engine.update_weights(path)``: SGLang's pause, update from disk,
   flush cache, continue);
3. tags the new weights policy version ``n = trainer.step_count``: an ``SGLangEngine`` names
   the update ``n`` (SGLang's ``weight_version``), so the server reports the trainer's version
   with every completion; another engine's own count is mapped to it.

Attaching pushes at once, so the server samples the trainer's policy whatever it was started
with; ``Trainer.load`` pushes again on resume. With data-parallel ranks sharing servers,
rank 0 writes and pushes while the others wait for it. Completions carry the trainer's version
(weights the trainer never pushed map to None), and
``Trainer.step`` refuses a batch holding a sample of version None or of a version this trainer
did not push (``UnknownPolicyVersion``); the versions pushed are kept in ``trainer.state``
(``pushed_versions``), so a resumed run knows those of the batches its checkpoint persisted.

A push never lands inside a completion: asynchronous training (``max_staleness`` >= 1)
generates from a background thread while the main thread updates and pushes. Every call to the
server runs on one event loop of the ``ServerPolicy``'s own (its HTTP client is bound to a
loop), and a push first holds new completions and waits for those running (on every rank, then
a barrier), so each completion, hence each turn, was sampled by one version, the one it records.
Only the load is held: the model directory is written while generation goes on.

With ``sync=GroupSync(...)`` (``agentgym.trainers.group_sync``) steps 1-2 go through a process
group instead of files (NCCL on GPUs, gloo on CPUs; buckets of flattened tensors), and every
sync is verified by a checksum of each tensor on both sides.

Several servers (a list of engines): a ``Router`` (``agentgym.inference.routing``) pins each
episode to one server and sends new ones to the least loaded; every push loads on each server
(one process group per server with ``sync``: a dead server breaks its own group only). A server
that cannot be reached while generating is marked down: the episode of that call ends as an
infrastructure failure (``EpisodeLost``) and the run goes on with the others; the server is
probed and taken back once it answers, after loading the current weights (between pushes by
disk from a single process; else at the next push, which rank 0 makes and every rank hears of).

A server that fails to load the weights at the start, or when no other holds them, or no server
left to generate, stops the run with ``InferenceServerError`` naming each URL: the last
checkpoint is untouched, and ``--resume`` continues from it once the servers are back.

::

    engine = attach_server(trainer, SGLangEngine("http://127.0.0.1:30000"), "runs/r1/weights")
    engine = attach_server(trainer, [SGLangEngine(a), SGLangEngine(b)], "runs/r1/weights")
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch

from agentgym.core.errors import ConfigError, Error, InfraError
from agentgym.core.types import Episode
from agentgym.inference.base import Completion, InferenceEngine, SamplingParams
from agentgym.inference.routing import EpisodeLost, EpisodeRoute, Router, current_route
from agentgym.trainers.group_sync import GroupSync, WeightSyncMismatch

if TYPE_CHECKING:
    from torch import Tensor

    from agentgym.trainers.backends import Backend


__all__ = [
    "InferenceServerError",
    "ServerPolicy",
    "UnknownPolicyVersion",
    "attach_server",
    "check_trainable_engine",
    "check_versions",
    "in_process",
]

T = TypeVar("T")

RESUME_FIX = "restart the server and rerun with --resume (the last checkpoint is intact)"
START_FIX = "start the server (or correct --engine-url) and rerun the same command"


class InferenceServerError(InfraError):
    """The inference server failed to load the policy's weights, or could not be reached."""


class UnknownPolicyVersion(Error, RuntimeError):
    """A batch holds a sample of no known policy version (None, or one the trainer did not
    push): training on it would learn from an unknown policy's tokens."""


def in_process(engine: Any) -> bool:
    """Whether ``engine`` generates in this process (tensors are pushed, not files): an
    ``HFEngine``, or an ``SGLangEngine`` sharing this process's GPU (``colocated``)."""
    from agentgym.inference.hf import HFEngine

    if isinstance(engine, HFEngine):
        return True
    # Never imported: not an SGLangEngine (and the train extra has no httpx to import it with).
    sglang = sys.modules.get("agentgym.inference.sglang")
    return sglang is not None and isinstance(engine, sglang.SGLangEngine) and engine.colocated


def _url(engine: Any) -> str:
    base = getattr(engine, "base_url", None)
    if base is None:
        http = getattr(engine, "_http", None)
        base = getattr(http, "base_url", None)
    return str(base) if base else type(engine).__name__


def check_trainable_engine(engine: Any) -> None:
    """Raise ``ConfigError`` unless training can use server ``engine``: it must load new
    weights from disk, which an OpenAI-compatible API cannot (whether or not it returns token
    ids; ``agentgym.recipes.engines.token_level`` asks that)."""
    from agentgym.inference.openai import OpenAIEngine

    if isinstance(engine, OpenAIEngine):
        raise ConfigError(
            "engine",
            f"openai ({_url(engine)})",
            "has no weight-update API: after the first update it would go on sampling the "
            "policy it was started with",
            "use --engine sglang (agentgym serve and SGLang load weights from disk), or "
            "--engine hf",
        )


class PushingTrainer(Protocol):
    """What a ``ServerPolicy`` uses of its ``Trainer`` (a protocol: ``Trainer.step`` imports
    this module)."""

    step_count: int
    backend: Backend
    tokenizer: Any
    state: dict[str, Any]

    def attach_engine(self, engine: InferenceEngine | None) -> None: ...

    def push_weights(self) -> None: ...

    def _export_policy(self, directory: Path, weights: dict[str, Tensor]) -> None: ...


class ServerPolicy:
    """One server or several (``engines``) as the trainer's engine: weights go to every one by
    disk or through a process group, completions carry the trainer's policy version, episodes
    are spread over the servers (``agentgym.inference.routing.Router``). See the module
    docstring; build it with ``attach_server``.

    Args:
        engine: a server engine whose ``update_weights`` takes a model directory, or a list
            of them (one per server).
        trainer: the trainer whose policy it serves (its ``step_count`` is the version).
        weights_dir: where the model directories go; on a file system the servers read.
        keep: model directories kept (the newest); >= 1.
        sync: push through process groups instead of files (``group_sync.GroupSync``:
            bucketed, verified by checksums; one group per server); the engines must be
            ``SGLangEngine``s.
        probe_s: seconds between probes of a server that stopped answering.
    """

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
        self.urls = [_url(e) for e in engines]
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

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        route = current_route()  # read here: the context does not cross to the loop
        return await self._home(self._generate(route, prompt_token_ids, sampling))

    def server_restarted(self, url: str) -> None:
        """The server at ``url`` was restarted (``ServerFleet``, from its thread): it holds the
        weights it starts with, so it is routed to again only once it holds the current ones."""
        index = self.urls.index(url.rstrip("/"))
        if self._loop is None:
            self._mark_down(index, None)
        else:
            self._loop.call_soon_threadsafe(self._mark_down, index, None)

    def close_with(self, close: Callable[[], None]) -> None:
        """Call ``close()`` when this policy closes (e.g. stop the servers a run launched)."""
        self._closers.append(close)

    # --- routing -------------------------------------------------------------------------------

    @property
    def _can_take_back(self) -> bool:
        """Whether a server can be brought to the current weights between pushes: by disk
        (the folder is kept), from a single process (ranks take servers back at a push)."""
        return self.sync is None and self.trainer.backend.world_size == 1

    def _mark_down(self, index: int, error: BaseException | None) -> None:
        """Server ``index`` stopped answering, or restarted (on the loop, or before it runs)."""
        if error is not None:
            self._errors[index] = error
        self.router.down(index)
        sync = self.syncs[index]
        if sync is not None:
            sync.group = None  # its group broke with it: the next push has it join a new one
        if self._can_take_back and self._loop is not None and index not in self._probes:
            self._probes[index] = asyncio.ensure_future(self._probe(index))

    async def _probe(self, index: int) -> None:
        """Every ``probe_s``: take server ``index`` back once it answers."""
        try:
            while not self.router.up[index]:
                await asyncio.sleep(self.probe_s)
                try:
                    await self._take_back(index)
                except Exception as error:  # refused the weights: it stays down, said at the end
                    self._errors[index] = error
        finally:
            self._probes.pop(index, None)

    async def _answers(self, index: int) -> bool:
        health = getattr(self.engines[index], "health", None)
        return True if health is None else bool(await health())

    async def _take_back(self, index: int) -> bool:
        """If server ``index`` answers, load the current weights into it and route to it."""
        async with self._loading:
            if self.router.up[index]:
                return True
            if self._current is None or not await self._answers(index):
                return False
            version, path = self._current
            try:
                served = await self._load(index, version, path, {})
            except (ConfigError, WeightSyncMismatch):
                raise
            except Exception as error:
                self._errors[index] = error
                return False
            if isinstance(served, int):
                self._versions[index][served] = version
            self.router.back(index)
            return True

    async def _route(self, route: EpisodeRoute | None) -> int:
        index = self.router.pick(route)
        if index is None and self._can_take_back:
            for down in range(len(self.engines)):
                if await self._take_back(down):
                    break
            index = self.router.pick(route)
        if index is None:
            raise self._none_left()
        return index

    def _none_left(self) -> InferenceServerError:
        causes = "; ".join(
            f"{url}: {type(e).__name__}: {e}" if e is not None else f"{url}: restarted"
            for url, e in zip(self.urls, self._errors, strict=True)
        )
        if len(self.urls) == 1:
            return InferenceServerError(
                f"the inference server at {self.urls[0]} failed while generating ({causes}). "
                f"Fix: {RESUME_FIX}."
            )
        return InferenceServerError(
            f"every inference server of the run stopped answering ({causes}). Fix: restart "
            "them (or pass the --engine-url of each one that runs) and rerun with --resume "
            "(the last checkpoint is intact)."
        )

    async def _generate(
        self, route: EpisodeRoute | None, prompt: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        while True:
            await self._open.wait()  # held while a push loads new weights
            index = await self._route(route)
            if self._open.is_set():  # no push began while a server was taken back
                break
        self._running += 1
        self._idle.clear()
        try:
            completion = await self.engines[index].generate(prompt, sampling)
        except InfraError as error:
            if _answered(error):  # a refusal from a server that runs, not a server gone
                raise InferenceServerError(
                    f"the inference server at {self.urls[index]} failed while generating: "
                    f"{error}. Fix: {RESUME_FIX}."
                ) from error
            self.lost += 1  # no answer: refused, dropped, or past its deadline
            self._mark_down(index, error)
            if self.router.any_up:  # the others go on: this episode ends as an infra failure
                raise EpisodeLost(self.urls[index], error) from error
            raise self._none_left() from error
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()
        served = completion.weight_version
        versions = self._versions[index]
        completion.weight_version = None if served is None else versions.get(served)
        return completion

    async def _hold(self) -> None:
        """Hold new completions and wait for those under way (on the loop)."""
        self._open.clear()
        await self._idle.wait()

    async def _release(self) -> None:
        self._open.set()

    # --- pushes --------------------------------------------------------------------------------

    async def update_weights(self, weights: Mapping[str, Tensor]) -> None:
        """Write ``weights`` as ``<weights_dir>/step-<n>`` and have every server load it (rank
        0; every rank calls it and holds its completions until rank 0's push is done, so no
        rank samples old weights after it, and no completion spans it)."""
        version = self.trainer.step_count
        backend = self.trainer.backend
        failure: BaseException | None = None
        loaded: list[bool] | None = None
        path = None
        if backend.rank == 0 and self.sync is None:
            try:
                path = await asyncio.to_thread(self._write, version, weights)
            except BaseException as error:
                failure = error
        await self._home(self._hold())
        try:
            if backend.world_size > 1:  # every rank's completions are held before the load
                backend.all_reduce(torch.zeros(1))
            if failure is None and (path is not None or (backend.rank == 0 and self.sync)):
                try:
                    loaded = await self._home(self._push_all(version, path, weights))
                except BaseException as error:  # every rank hears of it, then rank 0 raises
                    failure = error
            loaded = self._agree(failure, version, loaded)
            if backend.rank != 0:  # rank 0's servers, as rank 0 left them
                await self._home(self._adopt(version, loaded))
        finally:
            await self._home(self._release())
        self.version = version
        self._record(version)

    async def _push_all(
        self, version: int, path: Path | None, weights: Mapping[str, Tensor]
    ) -> list[bool]:
        """Load version ``version`` into every server (those down too, if they answer); a
        server that fails is marked down while another holds it, and the run stops when none
        does. Returns which servers hold it (rank 0, on the loop)."""
        async with self._loading:
            first = self.version is None and self._current is None
            results = await asyncio.gather(
                *(
                    self._push_one(i, version, path, weights, first)
                    for i in range(len(self.engines))
                ),
                return_exceptions=True,
            )
            for result in results:
                if isinstance(result, ConfigError | WeightSyncMismatch) or (
                    first and isinstance(result, BaseException)
                ):
                    raise result
            loaded = [not isinstance(r, BaseException) and r is not _SKIPPED for r in results]
            for index, result in enumerate(results):
                if loaded[index]:
                    if isinstance(result, int):
                        self._versions[index][result] = version
                    self.router.back(index)
                else:
                    self._mark_down(index, result if isinstance(result, BaseException) else None)
            if not any(loaded):
                if len(results) == 1 and isinstance(results[0], BaseException):
                    raise results[0]
                raise self._none_left()
            if path is not None:
                self._current = (version, path)
                await asyncio.to_thread(self._prune, path)
            return loaded

    async def _push_one(
        self,
        index: int,
        version: int,
        path: Path | None,
        weights: Mapping[str, Tensor],
        first: bool,
    ) -> Any:
        if not first and not self.router.up[index] and not await self._answers(index):
            return _SKIPPED  # still down: probed again, and offered the next push
        try:
            return await self._load(index, version, path, weights)
        except Exception as error:
            self._errors[index] = error
            raise

    def _agree(self, failure: BaseException | None, version: int, loaded: Any) -> list[bool]:
        """Every rank learns whether rank 0's push failed (then raises) and which servers hold
        ``version``."""
        backend = self.trainer.backend
        count = len(self.engines)
        if backend.world_size > 1:
            flags = torch.zeros(1 + count)
            flags[0] = float(failure is not None)
            if loaded is not None:
                flags[1:] = torch.tensor([float(x) for x in loaded])
            flags = backend.all_reduce(flags)
            if flags[0].item() > 0 and failure is None:
                raise InferenceServerError(
                    f"rank 0 failed to push the weights of update {version} to the inference "
                    f"server(s) at {self.url}. Fix: {RESUME_FIX}."
                )
            loaded = [bool(x > 0) for x in flags[1:].tolist()]
        if failure is not None:
            raise failure
        return list(loaded) if loaded is not None else [True] * count

    async def _adopt(self, version: int, loaded: list[bool]) -> None:
        """A rank other than 0: route to the servers that hold ``version`` (they report it)."""
        for index, holds in enumerate(loaded):
            if holds:
                self._versions[index][version] = version
                self.router.back(index)
            else:
                self._mark_down(index, None)

    def _record(self, version: int) -> None:
        """``version`` is known: here, and in the trainer's checkpointed state."""
        self.pushed.add(version)
        state = getattr(self.trainer, "state", None)
        if isinstance(state, dict):
            known = set(state.get("pushed_versions", ()))
            self.pushed |= known
            state["pushed_versions"] = sorted(known | {version})

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

    def _write(self, version: int, weights: Mapping[str, Tensor]) -> Path:
        final = self.weights_dir / f"step-{version:08d}"
        tmp = self.weights_dir / f".step-{version:08d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self.trainer._export_policy(tmp, dict(weights))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        return final.resolve()

    def _prune(self, newest: Path) -> None:
        others = sorted(p for p in self.weights_dir.glob("step-*") if p.resolve() != newest)
        for path in others[: max(0, len(others) - (self.keep - 1))]:
            shutil.rmtree(path, ignore_errors=True)

    def check(self, episodes: Iterable[Episode]) -> None:
        """Raise ``UnknownPolicyVersion`` if an episode holds a turn of version None or of a
        version this trainer did not push (in this process, or before the checkpoint it
        resumed from)."""
        state = getattr(self.trainer, "state", None)
        if isinstance(state, dict):
            self.pushed |= set(state.get("pushed_versions", ()))
        for episode in episodes:
            for version in episode.weight_versions:
                if version is None or version not in self.pushed:
                    raise UnknownPolicyVersion(
                        f"an episode (group {episode.group}) holds a turn sampled by policy "
                        f"version {version} from {self.url}, which this trainer did not push "
                        f"(pushed: {sorted(self.pushed)}). Nothing is trained on samples of an "
                        "unknown policy. Fix: collect with the engine the trainer pushes to, "
                        "after attach_server (or fit) pushed the weights."
                    )

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


def _answered(error: BaseException) -> bool:
    """Whether ``error`` is a server's HTTP error status (it answered)."""
    http = sys.modules.get("agentgym.inference._http")  # not imported: no such error (no httpx)
    return http is not None and isinstance(error, http.HTTPStatusError)


_SKIPPED = object()  # a push passed over a server that is down and does not answer


def check_versions(engine: Any, episodes: Iterable[Episode]) -> None:
    """``ServerPolicy.check`` when ``engine`` is one; in-process engines need no check."""
    if isinstance(engine, ServerPolicy):
        engine.check(episodes)


def attach_server(
    trainer: PushingTrainer,
    engine: InferenceEngine | Sequence[InferenceEngine],
    weights_dir: str | os.PathLike[str],
    *,
    keep: int = 2,
    sync: GroupSync | None = None,
) -> ServerPolicy:
    """Attach ``engine`` (a server) to ``trainer`` through a ``ServerPolicy`` and push the
    trainer's weights to it now (by files, or through ``sync``'s process group); returns the
    ``ServerPolicy`` (an ``InferenceEngine``)."""
    if isinstance(engine, ServerPolicy):
        trainer.attach_engine(engine)
        return engine
    for each in engine if isinstance(engine, Sequence) else [engine]:
        if in_process(each):
            raise ConfigError(
                "engine",
                type(each).__name__,
                "generates in this process and takes the policy's tensors",
                "attach it with trainer.attach_engine (or colocated_engine)",
            )
        check_trainable_engine(each)
    policy = ServerPolicy(engine, trainer, weights_dir, keep=keep, sync=sync)
    trainer.attach_engine(policy)
    trainer.push_weights()
    return policy
