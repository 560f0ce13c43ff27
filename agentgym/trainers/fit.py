"""The training loop: collect, step, log, checkpoint, and resume exactly where a run stopped.

Episodes come from an ``EpisodeSource``: the seam where the rollout collector plugs in (policy
x vector env -> episodes). The loop writes the trainer's state and nothing else::

    <out>/checkpoints/step-<n>/       Trainer.save, every ``checkpoint_every`` updates
    <out>/weights/                    a server engine's weights (``weights_dir``)

Metrics rows are returned, passed to ``on_metrics`` and, with ``recorder=``, recorded
(``agentgym.trainers.recorder``: ``agentgym train``'s run folder writes them to
``metrics.jsonl``, ``agentgym.recipes.run_folder``).

A step whose every episode was dropped (a dead env server, an env that raises) makes no update
but writes its row, which the guards see; ``max_empty_steps`` of them in a row raise
``NoTrainableEpisodes`` naming the causes (``agentgym.trainers.stalls``). Updates whose groups
all had equal rewards warn with ``NoLearningSignalWarning``.

Resuming loads the newest complete checkpoint, restores the source's position from it and hands
the recorder its state at that checkpoint (it forgets the rows recorded after), so a run killed
at any moment (SIGKILL included) continues without repeating or skipping an update.

With several data-parallel ranks (``trainer.backend.world_size > 1``) an env id is collected by
a ``ShardedSource``: each rank plays its share of the batch and all train on the whole of it
(``agentgym.rollout.sharded_source``). Metrics are joined over ranks and recorded by rank 0,
with the source's ``stats`` (``SourceBase.stats``: collect timings); a stop requested on any
rank stops every rank after the same update.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.core.errors import ConfigError
from agentgym.rollout.source import EpisodeSource, SourceBase, as_source
from agentgym.trainers.algorithms import AdvantageEstimator
from agentgym.trainers.checkpoint import MANIFEST, find_latest
from agentgym.trainers.pipeline import close_pipeline, pipelined
from agentgym.trainers.stalls import DEFAULT_MAX_EMPTY_STEPS, EmptySteps, FlatSteps

if TYPE_CHECKING:
    from agentgym.core.types import Episode
    from agentgym.inference.base import InferenceEngine
    from agentgym.rollout.traces import Trace
    from agentgym.trainers.guards import Guards
    from agentgym.trainers.recorder import Recorder
    from agentgym.trainers.trainer import Trainer

__all__ = ["fit"]


def _source_for(trainer: Trainer, target: Any, engine_device: str) -> EpisodeSource:
    """``target`` itself when it is a source; for an env id or an ``AgentVectorEnv``, the rollout
    collector sampling from the trainer's engine, or else an ``HFEngine`` on ``engine_device``
    (``colocated_engine``: on the trainer's device sharing its weights by default; attached to
    the trainer, so it gets the new weights after every update)."""
    if isinstance(target, EpisodeSource):
        return target
    from agentgym.vector import AgentVectorEnv

    if not isinstance(target, str | AgentVectorEnv):
        raise ConfigError(
            "env",
            type(target).__name__,
            "is not an env id, an AgentVectorEnv or an EpisodeSource",
            "pass e.g. 'agentgym/FrozenLake-v0'",
        )
    from agentgym.rollout.collector_source import CollectorSource, shard_size
    from agentgym.rollout.sharded_source import ShardedSource
    from agentgym.trainers.colocate import colocated_engine

    config, backend = trainer.config, trainer.backend
    shard_size(config.groups_per_batch, backend.world_size)  # whole groups per rank, or now
    engine = trainer.engine
    if engine is None:
        engine, _ = colocated_engine(trainer, engine_device)
    local = CollectorSource(
        engine,
        target,
        group_size=config.group_size,
        seed=config.seed,
        temperature=config.temperature,
        max_tokens=config.max_new_tokens,
        rank=backend.rank,
        world_size=backend.world_size,
    )
    return local if backend.world_size == 1 else ShardedSource(local, backend)


def _attach(
    trainer: Trainer,
    engine: InferenceEngine | None,
    source: Any,
    folder: str | os.PathLike[str] | None,
    under_out: bool,
) -> None:
    """Attach ``engine`` (else keep the trainer's); a server gets ``weight_sync``'s disk
    sync into ``folder`` (``<out>/weights`` when ``under_out``), and a ``source`` collecting
    from the bare server collects through it (its samples then carry the trainer's versions)."""
    from agentgym.trainers.weight_sync import ServerPolicy, attach_server, in_process

    engine = trainer.engine if engine is None else engine
    if engine is None or isinstance(engine, ServerPolicy) or in_process(engine):
        if engine is not trainer.engine:
            trainer.attach_engine(engine)
        return
    if folder is None:
        raise ConfigError(
            "weights_dir",
            None,
            "is needed: a server engine loads the policy's weights from disk",
            "pass out= (weights go to <out>/weights) or weights_dir=",
        )
    synced = attach_server(trainer, engine, Path(folder) / "weights" if under_out else folder)
    if isinstance(source, SourceBase) and source.engine is synced.engine:
        source.engine = synced


def _prune(directory: Path, keep: int, protect: int | None = None) -> None:
    """Keep the newest ``keep`` checkpoints, and the one of update ``protect`` (a guard's)."""
    steps = sorted(
        (int(p.name.removeprefix("step-")), p)
        for p in directory.glob("step-*")
        if (p / MANIFEST).is_file()
    )
    for step, path in steps[:-keep]:
        if step != protect:
            shutil.rmtree(path, ignore_errors=True)


class _Run:
    """What ``fit`` keeps of a run: checkpoints under ``<out>/checkpoints`` (none without
    ``out``), the recorder's rows and the episode trace (rank 0)."""

    def __init__(
        self,
        out: Path | None,
        trainer: Trainer,
        keep: int,
        guards: Guards | None,
        recorder: Recorder | None,
        trace: Trace | None = None,
    ) -> None:
        self.checkpoints = None if out is None else out / "checkpoints"
        self.trainer, self.keep, self.guards = trainer, keep, guards
        self.recorder = recorder if trainer.backend.rank == 0 else None
        tracing = trace is not None and trace.on
        if tracing:  # on every rank: the trainer's logprobs are gathered over ranks
            trainer.keep_tokens()
        self.trace = trace if tracing and trainer.backend.rank == 0 else None
        self.pending: list[Episode] = []
        """The episodes collected since the last row (DAPO's rounds before an update)."""
        if guards is not None:
            guards.attach(self.recorder, trainer.backend.rank)

    def start(self, source: EpisodeSource, resume: bool) -> None:
        latest = None
        if resume and self.checkpoints is not None:
            latest = find_latest(self.checkpoints)
        if latest is None:  # a fresh run, or one killed before its first checkpoint
            if self.recorder is not None:
                self.recorder.load_state_dict(None)
            if self.guards is not None:
                self.guards.load_state_dict(None)
        else:
            self.trainer.load(latest)
            source.load_state_dict(self.trainer.state["source"])
            if self.guards is not None:
                self.guards.load_state_dict(self.trainer.state.get("guards"))
            if self.recorder is not None:
                self.recorder.load_state_dict(self.trainer.state.get("recorder", {}))
        if self.trace is not None:  # the files after the checkpoint go: they are played again
            at = None if latest is None else {"update": self.trainer.step_count}
            self.trace.load_state_dict(at)
            self.trace.start(self.trainer.tokenizer)

    def record(self, metrics: Mapping[str, float]) -> None:
        if self.recorder is not None:
            self.recorder.row(metrics)

    def trace_row(self, metrics: Mapping[str, Any]) -> None:
        """Trace the episodes collected for this row, with the trainer's numbers."""
        pending, self.pending = self.pending, []
        if self.trace is None:
            return
        tokens = self.trainer.last_tokens
        if tokens is not None:  # DAPO: groups a checkpoint kept from before a resume
            seen = {id(e) for e in pending}
            pending += [e for e in tokens.episodes if id(e) not in seen]
        empty = metrics.get("empty_steps")
        empty = None if empty is None else int(empty)
        group_size = self.trainer.config.group_size
        self.trace.write(
            self.trainer.step_count, pending, tokens, empty=empty, group_size=group_size
        )

    def close(self) -> None:
        if self.trace is not None:
            self.trace.close()

    def checkpoint(self, source: EpisodeSource) -> None:
        trainer, directory = self.trainer, self.checkpoints
        if directory is None:
            return
        trainer.state["source"] = source.state_dict()
        if self.recorder is not None:
            trainer.state["recorder"] = self.recorder.state_dict()
        if self.trace is not None:  # waits for the files up to this update
            trainer.state["trace"] = self.trace.state_dict(trainer.step_count)
        protect = None
        if self.guards is not None:
            trainer.state["guards"] = self.guards.state_dict()
            protect = self.guards.protected(directory, trainer.step_count)
        trainer.save(directory / f"step-{trainer.step_count:08d}")
        if trainer.backend.rank == 0:
            _prune(directory, self.keep, protect)


def _update(
    trainer: Trainer, episodes: SourceBase, guards: Guards | None
) -> tuple[dict[str, Any], list[Any]]:
    """Collect a batch and step on it; the metrics joined over ranks (``update`` 0 and no
    ``empty``: DAPO's dynamic sampling wants more groups), and the batch."""
    from agentgym.trainers.sharding import reduce_metrics

    batch = episodes.collect(trainer.config.groups_per_batch)
    step_metrics = trainer.step(batch)
    if guards is not None:  # rates over the episodes, before admission drops any
        counted = bool(step_metrics["update"] or step_metrics.get("empty"))
        step_metrics.update(guards.episode_metrics(batch, counted))
    metrics = reduce_metrics(step_metrics, trainer.backend)
    metrics.update(episodes.stats)  # a ShardedSource's collect times
    return metrics, list(batch)


_GROUP_RELATIVE = (AdvantageEstimator.GROUP, AdvantageEstimator.RLOO)


class _Stalls:
    """The loop's watch over steps that teach nothing (``agentgym.trainers.stalls``)."""

    def __init__(self, trainer: Trainer, guards: Guards | None, limit: int | None) -> None:
        if limit is None:
            limit = DEFAULT_MAX_EMPTY_STEPS
            if guards is not None:
                limit = guards.config.settings.max_empty_steps
        self.group_size = trainer.config.group_size
        self.empty = EmptySteps(limit)
        # group-relative advantages are all 0 in a group whose rewards are equal
        relative = trainer.config.advantage_estimator in _GROUP_RELATIVE and self.group_size > 1
        self.flat = FlatSteps(relative and trainer.backend.rank == 0)

    def row(self, metrics: dict[str, Any], batch: list[Any]) -> bool:
        """Turn a step's metrics into its row (``update`` goes: ``step`` counts updates; an
        empty step gets ``empty_steps``); False: no row (DAPO wants more groups)."""
        updated = bool(metrics.pop("update"))
        empty = bool(metrics.pop("empty", 0.0))
        if not updated and not empty:
            return False
        self.empty.observe(batch, metrics, empty, self.group_size)
        self.flat.observe(metrics)
        return True


def _record(
    run: _Run, guards: Guards | None, metrics: dict[str, Any], source: EpisodeSource
) -> str | None:
    """Log an update's metrics; the guards' verdict on them (``stop``, ``rollback``: done)."""
    run.record(metrics)
    return guards.check(metrics, run, source) if guards is not None else None


def _due(trainer: Trainer, metrics: Mapping[str, Any], stop: bool, every: int, steps: int) -> bool:
    """Whether to checkpoint after this row: every ``every`` updates, after the last, and when
    stopping; never after an empty step (no update: nothing new to save)."""
    if "empty_steps" in metrics:
        return False
    return stop or trainer.step_count % every == 0 or trainer.step_count == steps


def _asked(should_stop: Callable[[], bool] | None, trainer: Trainer) -> bool:
    """Whether ``should_stop`` says so on any rank (collective)."""
    from agentgym.trainers.sharding import any_rank

    return should_stop is not None and any_rank(should_stop(), trainer.backend)


def fit(
    trainer: Trainer,
    source: EpisodeSource | Any,
    *,
    steps: int,
    out: str | os.PathLike[str] | None = None,
    checkpoint_every: int = 10,
    keep_checkpoints: int = 2,
    resume: bool = True,
    on_metrics: Callable[[dict[str, float]], None] | None = None,
    recorder: Recorder | None = None,
    should_stop: Callable[[], bool] | None = None,
    engine_device: str = "auto",
    engine: InferenceEngine | None = None,
    weights_dir: str | os.PathLike[str] | None = None,
    guards: Guards | None = None,
    max_empty_steps: int | None = None,
    trace: Trace | None = None,
) -> list[dict[str, float]]:
    """Train until ``trainer.step_count == steps``; returns this call's metrics rows (one per
    update, and one per step whose every episode was dropped).

    ::

        fit(trainer, "agentgym/FrozenLake-v0", steps=100, out="runs/fl")  # rerun: resumes
        fit(trainer, source, steps=100, out="runs/fl", recorder=RunFolder("runs/fl"))

    The first writes ``runs/fl/checkpoints/`` only; the second is how ``agentgym train`` adds
    its logs (``agentgym.recipes.run_folder.RunFolder``: ``metrics.jsonl`` and the guards'
    files), kept exact across kills and resumes.

    Args:
        source: An ``EpisodeSource``, or an env id / ``AgentVectorEnv`` to collect from with
            an ``HFEngine`` on the policy (``trainer.engine`` when one is attached).
        out: Where checkpoints go (``<out>/checkpoints/step-<n>``) and a resumed run finds
            them; None: nothing is written (no resume, no rollback).
        checkpoint_every: Save after every this many updates, and after the last.
        keep_checkpoints: Complete checkpoints kept; older ones are deleted.
        resume: Continue from the newest checkpoint in ``out`` when there is one.
        on_metrics: Called with each update's metrics (progress bars, TensorBoard).
        recorder: Records each metrics row and guard event, and forgets those after the
            checkpoint a run resumes from (``agentgym.trainers.recorder.Recorder``; rank 0).
        should_stop: Asked after each update; True ends the run early, after a checkpoint
            (how ``agentgym train`` stops cleanly on Ctrl-C). With several ranks, pass it on
            every rank (or on none): True on any rank stops them all.
        engine_device: Where the ``HFEngine`` made for an env id runs: ``auto`` (the trainer's
            device, sharing the policy's weights; see ``agentgym.trainers.colocate``), ``cpu``,
            ``cuda`` or ``cuda:N``. Unused when the trainer has an engine attached.
        engine: The engine to collect with, attached to the trainer (else the one attached,
            else the ``HFEngine`` above). A server (``SGLangEngine``) gets the weights by disk
            (``agentgym.trainers.weight_sync``: pushed before the first collect, then after
            every update).
        weights_dir: Where the model directories for a server go; None: ``<out>/weights``.
        guards: Failure-mode monitors (``agentgym.trainers.guards``), checked after every
            update: they warn, stop the run, or roll it back to a good checkpoint of ``out``.
        max_empty_steps: Steps in a row whose every episode was dropped before the run stops
            with ``NoTrainableEpisodes``; None: the guards' setting, else 3.
        trace: Where every episode of every update goes, with the trainer's logprobs and
            advantages (``agentgym.rollout.traces.Trace``; written by rank 0 off the training
            thread, resumed and rolled back with the run). Pass it on every rank.

    Raises:
        NoTrainableEpisodes: ``max_empty_steps`` steps in a row had no episode to train on (or
            a guard stopped the run on such a step); the message counts the causes.
    """
    for name, value in (
        ("steps", steps),
        ("checkpoint_every", checkpoint_every),
        ("keep_checkpoints", keep_checkpoints),
    ):
        if value < 1:
            raise ConfigError(name, value, "must be >= 1", "use e.g. 10")
    folder = out if weights_dir is None else weights_dir
    _attach(trainer, engine, source, folder, weights_dir is None)
    episodes = as_source(_source_for(trainer, source, engine_device))
    episodes = pipelined(episodes, trainer, engine=episodes.engine)  # max_staleness >= 1
    directory = None if out is None else Path(out)
    run = _Run(directory, trainer, keep_checkpoints, guards, recorder, trace)
    history, stalls = [], _Stalls(trainer, guards, max_empty_steps)
    try:
        run.start(episodes, resume)
        while trainer.step_count < steps:
            metrics, batch = _update(trainer, episodes, guards)
            run.pending += batch
            if not stalls.row(metrics, batch):
                continue  # dynamic sampling wants more groups
            history.append(metrics)
            if on_metrics is not None:
                on_metrics(metrics)
            run.trace_row(metrics)
            verdict = _record(run, guards, metrics, episodes)
            stalls.empty.check(stopping=verdict == "stop")
            if verdict == "rollback":
                continue  # back at a good checkpoint, written again with the guards' state
            stop = verdict == "stop" or _asked(should_stop, trainer)
            if _due(trainer, metrics, stop, checkpoint_every, steps):
                run.checkpoint(episodes)
            if stop:
                break
    finally:
        close_pipeline(episodes)  # max_staleness >= 1: the background collection
        run.close()  # the trace's last files
    return history
