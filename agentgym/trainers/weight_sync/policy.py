"""``ServerPolicy``: the trainer's engine when servers generate; pushes the policy to every
server and keeps the policy version of every sample.

A push (``update_weights``, every rank calls it) writes ``<weights_dir>/step-<n>`` (rank 0, by
disk) while generation goes on, then holds new completions on every rank, has every server load
version ``n`` (from the folder, or through its process group), and lets every rank learn which
servers hold it; a server that fails is marked down while another holds the weights. The
versions pushed are kept here and in the trainer's checkpointed state, and ``check`` refuses a
batch holding a sample of any other. ``attach_server`` builds one and pushes at once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.inference.base import InferenceEngine
from agentgym.trainers.group_sync import GroupSync, WeightSyncMismatch
from agentgym.trainers.weight_sync.engines import (
    RESUME_FIX,
    InferenceServerError,
    UnknownPolicyVersion,
    check_trainable_engine,
    in_process,
)
from agentgym.trainers.weight_sync.routing import RoutedServers
from agentgym.trainers.weight_sync.servers import PushingTrainer

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["ServerPolicy", "attach_server", "check_versions"]


class ServerPolicy(RoutedServers):
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
