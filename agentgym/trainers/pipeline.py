"""Asynchronous training: the next batches are collected while the trainer updates.

With ``config.max_staleness = k >= 1``, ``fit`` wraps its source in an ``AsyncSource``::

    collector = CollectorSource(engine, "agentgym/FrozenLake-v0", group_size=8)
    source = AsyncSource(collector, trainer, engine=collector.engine)
    batch = source.collect(groups)     # made ahead, in a background thread
    trainer.step(batch)                # meanwhile the thread collects the batch after next

A background thread (one, with its own event loop) runs the wrapped source's ``collect``; up to
``k`` batches are queued ahead of the one ``fit`` takes. A batch is bound to the policy version
current when it is queued: collected by the weights of update ``v``, it is trained on at update
``v + k`` (sooner in DAPO's refill rounds, which take batches without an update between them).
The binding does not depend on timing, so a run is reproducible and resumes exactly.

Versions: an episode's ``weight_versions`` are rewritten from the engine's counter to the policy
version (``trainer.step_count``) whose weights sampled each turn. ``Trainer.step`` drops every
group holding a turn older than ``step_count - k``, or of no known version (``stale_groups``),
and corrects the rest by truncated importance sampling with the sampling logprobs
(``tis_cap``: the trainer sets 2 when the config leaves it unset, unless
``old_logprobs='engine'``, whose PPO ratio already is taken against the sampling logprobs).
Without it a one-optimizer-step update would take samples of ``π_{v}`` as those of ``π_{v+k}``.

Weights: the optimizer must not change the weights under a running generation, so the engine
the thread samples from has weights of its own. That engine is the ``engine`` argument: the one
the source samples with (``SourceBase.engine``; ``fit`` passes it). An ``HFEngine`` sharing the
trainer's parameters (``colocate``'s default) is replaced, for collection only, by an engine on a
copy of the policy (``colocate.engine_copy``), which the source's ``engine`` holds meanwhile; an
in-process engine with its own copy is detached from the trainer
while the pipeline runs. After each update the main thread snapshots the policy's weights
(``Trainer.policy_state_dict``, a collective under ZeRO-3, so never in the thread); the thread
loads a batch's snapshot into its engine before collecting it. ``close`` gives a detached engine
back to the trainer with the newest weights.

A server engine (``weight_sync.ServerPolicy``: SGLang, ``agentgym serve``) holds one set of
weights, the newest: the thread generates on it while the main thread updates, and
``Trainer.step`` pushes after each update from the main thread (the policy holds new completions
and waits for those running, then the server pauses, loads from disk, flushes and continues).
A batch queued at version ``v`` is then sampled by ``v`` or newer ones, so turns are not bound
to the queueing version: each records the version that sampled it, which the server reports.
An episode whose turns straddle a push is kept; its version for staleness is its oldest turn's.

Checkpoints persist the batches in flight: ``state_dict`` waits for the queued collections to
finish and saves their episodes (every rank's, gathered into rank 0's checkpoint) with the
wrapped source's position after them; a resumed run trains on exactly the batches the
uninterrupted one did. A source without an engine (``engine=None``: a test's, a replay buffer)
is collected ahead as it is, and its episodes' versions are taken as policy versions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Set
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.rollout.sharded_source import ShardedSource
from agentgym.rollout.source import EpisodeSource, SourceBase, as_source

if TYPE_CHECKING:
    from torch import Tensor

    from agentgym.inference.base import InferenceEngine
    from agentgym.trainers.trainer import Trainer

__all__ = ["AsyncSource", "close_pipeline", "pipelined"]

Weights = dict[str, "Tensor"]


class AsyncSource(SourceBase):
    """``source`` collected up to ``max_staleness`` batches ahead of ``trainer``; see the
    module docstring.

    Args:
        source: the source to run in the background thread (a ``CollectorSource``, or any
            ``EpisodeSource``).
        trainer: the trainer whose ``step_count`` is the policy version.
        max_staleness: batches collected ahead; None: ``trainer.config.max_staleness``.
        engine: the engine ``source`` samples with, which gets weights of its own (it must be
            ``source.engine`` where the source declares one); None: the source samples with
            none, and its episodes carry policy versions.
    """

    def __init__(
        self,
        source: EpisodeSource,
        trainer: Trainer,
        max_staleness: int | None = None,
        *,
        engine: InferenceEngine | None = None,
    ) -> None:
        k = trainer.config.max_staleness if max_staleness is None else max_staleness
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(
                "max_staleness", k, "must be an int >= 1 for AsyncSource", "use 1, or 0 and no wrap"
            )
        self.source, self.trainer, self.max_staleness = as_source(source), trainer, k
        if self.source.engine is not None and engine is not self.source.engine:
            raise ConfigError(
                "engine",
                None if engine is None else type(engine).__name__,
                f"is not the {type(self.source.engine).__name__} the source samples with: "
                "collecting ahead loads each batch's weights into that engine",
                "pass engine=source.engine",
            )
        self.engine = engine
        self._queue: deque[tuple[int, Future[list[Episode]]]] = deque()
        self._ready: deque[tuple[int, list[Episode]]] = deque()
        self._executor: ThreadPoolExecutor | None = None
        self._engine: Any = None  # the engine the thread samples from, when the source has one
        self._owned = False  # the engine is ours (a copy): closed by close()
        self._detached: Any = None  # the trainer's engine, detached while the pipeline runs
        self._replaced: Any = None  # the source's own engine, while it collects on a copy
        self._published: tuple[int, Weights | None] | None = None
        self._engine_policy: int | None = None  # the policy version the engine holds
        self._versions: dict[int, int] = {}  # engine weight_version -> policy version

    @property
    def seen_tasks(self) -> Set[str]:  # type: ignore[override]
        """The wrapped source's."""
        return self.source.seen_tasks

    # -- EpisodeSource ---------------------------------------------------------------------

    def collect(self, num_groups: int) -> list[Episode]:
        """The oldest batch collected ahead (collected now on the first call); queues the next
        with the policy's current weights."""
        if self._executor is None:
            self._start()
        version, weights = self._publish()
        while len(self._ready) + len(self._queue) <= self.max_staleness:
            self._submit(num_groups, version, weights)
        groups, batch = self._ready.popleft() if self._ready else self._wait_oldest()
        if groups != num_groups:
            raise ConfigError(
                "num_groups",
                num_groups,
                f"differs from the {groups} groups per batch collected ahead",
                "ask an AsyncSource for the same number of groups every time",
            )
        return batch

    def state_dict(self) -> dict[str, Any]:
        """The wrapped source's position after every queued batch, and those batches (every
        rank's: rank 0 writes the checkpoint): waits for the collections in flight to finish.
        Collective with several ranks (main thread)."""
        while self._queue:
            self._ready.append(self._wait_oldest())
        ready = [(groups, batch) for groups, batch in self._ready]
        backend = self.trainer.backend
        every = [ready] if backend.world_size == 1 else backend.all_gather_object(ready)
        return {"source": self.source.state_dict(), "ready": every}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state_dict``'s, or from a synchronous run's source state."""
        while self._queue:
            self._wait_oldest()
        if "ready" not in state:  # a checkpoint of a synchronous run: nothing was ahead
            self.source.load_state_dict(state)
            self._ready.clear()
            return
        backend, every = self.trainer.backend, state["ready"]
        if len(every) != backend.world_size:
            raise ConfigError(
                "checkpoint",
                f"{len(every)} rank(s) collecting ahead",
                f"holds the batches collected ahead by another number of ranks than "
                f"{backend.world_size}",
                "resume with the number of processes that wrote it",
            )
        self.source.load_state_dict(state["source"])
        self._ready = deque((int(g), list(batch)) for g, batch in every[backend.rank])

    def close(self) -> None:
        """Drop queued collections (after the running one), close the engine copy, and give a
        detached engine back to the trainer with the current weights."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        for _, future in self._queue:
            future.cancel()
        self._queue.clear()
        engine, self._engine = self._engine, None
        if engine is not None and self._owned:
            executor.submit(lambda: run_sync(engine.close())).result()
            self.source.engine = self._replaced
            self._owned, self._replaced = False, None
        executor.shutdown(wait=True)
        self._published, self._engine_policy = None, None
        self._versions.clear()
        if self._detached is not None:
            self.trainer.attach_engine(self._detached)
            self._detached = None
            self.trainer.push_weights()

    # -- inside ----------------------------------------------------------------------------

    def _start(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="agentgym-async-collect")
        engine = self.engine
        if engine is None:
            return
        from agentgym.inference.hf import HFEngine
        from agentgym.trainers.colocate import engine_copy
        from agentgym.trainers.weight_sync import ServerPolicy

        trainer = self.trainer
        if isinstance(engine, ServerPolicy):  # turns come tagged; the trainer pushes
            return
        if not isinstance(engine, HFEngine):
            raise ConfigError(
                "engine",
                type(engine).__name__,
                "cannot collect ahead: asynchronous training needs an in-process HFEngine or "
                "a server the trainer pushes to (weight_sync.attach_server)",
                "use --engine hf or --engine sglang, or max_staleness=0",
            )
        if engine.model is trainer.module.policy:  # shared parameters: collect on a copy
            self._check_declared(engine)
            device = str(next(engine.model.parameters()).device)
            engine = engine_copy(trainer, device, max_batch_size=engine.max_batch_size)
            self._owned, self._replaced = True, self.source.engine
            self.source.engine = engine
        elif trainer.engine is engine:
            self._detached = engine
            trainer.attach_engine(None)
        self._engine = engine

    def _check_declared(self, engine: InferenceEngine) -> None:
        """``engine`` is the source's declared one, which a copy can stand in for."""
        if self.source.engine is not engine:
            raise ConfigError(
                "engine",
                type(engine).__name__,
                "shares the trainer's weights, and the source does not declare it as its "
                "engine, so it cannot sample from a copy while the trainer updates",
                "collect from a SourceBase whose engine is this one (CollectorSource)",
            )

    def _publish(self) -> tuple[int, Weights | None]:
        """The current policy version and, for an engine, a snapshot of its weights (taken
        once per version, in the caller's thread: a collective under ZeRO-3)."""
        version = self.trainer.step_count
        if self._published is None or self._published[0] != version:
            weights = None
            if self._engine is not None:
                state = self.trainer.policy_state_dict()
                weights = {name: t.detach().clone() for name, t in state.items()}
            self._published = (version, weights)
        return self._published

    def _submit(self, num_groups: int, version: int, weights: Weights | None) -> None:
        assert self._executor is not None
        future = self._executor.submit(self._collect, num_groups, version, weights)
        self._queue.append((num_groups, future))

    def _wait_oldest(self) -> tuple[int, list[Episode]]:
        groups, future = self._queue.popleft()
        return groups, future.result()

    def _collect(self, num_groups: int, version: int, weights: Weights | None) -> list[Episode]:
        """In the background thread: load ``weights`` (policy ``version``) if the engine holds
        others, collect, and tag every turn with its policy version."""
        engine = self._engine
        if engine is None:
            return _versioned(self.source.collect(num_groups))
        if self._engine_policy != version:
            run_sync(engine.update_weights(weights))
            self._versions[engine.weight_version] = version
            self._engine_policy = version
        episodes = self.source.collect(num_groups)
        for episode in episodes:
            episode.weight_versions = [
                None if v is None else self._versions.get(v) for v in episode.weight_versions
            ]
        return episodes


def _versioned(episodes: list[Episode]) -> list[Episode]:
    """``episodes``, when each records the policy version of each of its turns."""
    for i, episode in enumerate(episodes):
        if len(episode.weight_versions) != len(episode.turns):
            raise ConfigError(
                f"episodes[{i}].weight_versions",
                episode.weight_versions,
                f"must hold the policy version of each of its {len(episode.turns)} turns: "
                "asynchronous training drops samples older than max_staleness versions",
                "collect with a CollectorSource, or set weight_versions (trainer.step_count "
                "of the weights that sampled each turn)",
            )
    return episodes


def pipelined(
    source: SourceBase, trainer: Trainer, *, engine: InferenceEngine | None
) -> SourceBase:
    """``source`` collected ahead with ``engine`` (the one it samples with) when
    ``trainer.config.max_staleness >= 1`` (else itself). Inside a ``ShardedSource``, whose
    gather must stay in the main thread, the rank's ``local`` source is wrapped."""
    if not trainer.config.max_staleness or isinstance(source, AsyncSource):
        return source
    if isinstance(source, ShardedSource):
        if not isinstance(source.local, AsyncSource):
            source.local = AsyncSource(source.local, trainer, engine=engine)
        return source
    return AsyncSource(source, trainer, engine=engine)


def close_pipeline(source: EpisodeSource) -> None:
    """Stop the background collection of a source ``pipelined`` returned (else nothing)."""
    inner = source.local if isinstance(source, ShardedSource) else source
    if isinstance(inner, AsyncSource):
        inner.close()
