"""A training run from start to summary: what ``agentgym train`` does.

::

    summary = train_run(resolve_run(Layer("mine", {"env": "agentgym/FrozenLake-v0"})))

The run folder ``out`` holds ``run.json`` (the resolved ``RunConfig`` in the run-file format,
and the trainer's config), ``metrics.jsonl`` (``fit``'s rows, through ``RunFolder``),
``tensorboard/``, ``curves.png``, ``checkpoints/``, ``tasks.jsonl`` (each group played: its task,
difficulty, tries and successes, as the run's curriculum drew it) and, at the end,
``summary.json``: success before training and after (Wilson 95% intervals), after also on tasks
the run never trained on.
Ctrl-C stops after the running update, with a checkpoint; ``resume`` continues from it. A run
whose steps in a row drop every episode (``NoTrainableEpisodes``) writes ``summary.json`` with
the error and the dropped episodes by cause, and raises.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError, NoTrainableEpisodes
from agentgym.core.jsonsafe import json_safe
from agentgym.recipes.config import RunConfig
from agentgym.recipes.eval_cache import cached_evaluation
from agentgym.recipes.multiagent import evaluate_roles
from agentgym.recipes.multiagent import run_source as multiagent_source
from agentgym.recipes.report import EvalResult, evaluate, plot_curves
from agentgym.registry.lookup import prepare_env
from agentgym.registry.multiagent import is_multiagent
from agentgym.rollout.collector_source import CollectorSource
from agentgym.rollout.scaffold import make_scaffold
from agentgym.rollout.source import SourceBase

__all__ = ["trace_hint", "train_run"]

EVAL_SEED = 1_000_000_000
"""Evaluation plays reset seeds from here on: far from the training seeds (``seed + group``)."""


class _StopFlag:
    """The first Ctrl-C asks the run to stop after its update (and checkpoint); a second
    one interrupts at once."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self) -> bool:
        return self.requested

    @contextmanager
    def installed(self) -> Iterator[None]:
        def handle(signum: int, frame: Any) -> None:
            if self.requested:
                raise KeyboardInterrupt
            self.requested = True
            print("\nStopping after this update (Ctrl-C again to abort)...", flush=True)

        try:
            previous = signal.signal(signal.SIGINT, handle)
        except ValueError:  # not the main thread: no handler, Ctrl-C works as usual
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


def _prepare_out(run: RunConfig, out: Path) -> None:
    has_checkpoints = any((out / "checkpoints").glob("step-*"))
    if has_checkpoints and not run.resume:
        raise ConfigError(
            "--out",
            str(out),
            "already holds a run's checkpoints",
            "pass --resume to continue it, or a new --out",
        )
    if run.resume and not (out / "run.json").is_file():
        raise ConfigError("--resume", str(out), "holds no run.json", "point --out at a run")
    out.mkdir(parents=True, exist_ok=True)


def _server_engine(run: RunConfig, trainer: Any, out: Path) -> Any:
    """The servers at ``run.engine_url`` (one or several), attached to ``trainer`` by disk, or
    through process groups with ``run.weight_sync = "group"`` (``weight_sync``:
    the trainer's weights pushed now, then after every update). An OpenAI-compatible server is
    refused: without token ids and logprobs nothing can be trained on its text, and with them
    it still cannot load new weights."""
    from agentgym.core.errors import InfraError
    from agentgym.recipes.engines import TINY_NAME, EngineSpec, make_engine, token_level
    from agentgym.trainers.weight_sync import attach_server

    fleet = _launch(run, trainer) if run.launch else None
    urls = fleet.urls if fleet is not None else run.engine_urls
    engines = [
        make_engine(
            EngineSpec(kind=run.engine, url=url, model=run.model or TINY_NAME),
            seed=run.seed,
            tokenizer=trainer.tokenizer,
        )
        for url in urls
    ]
    engine = engines[0]
    try:
        if run.engine == "openai":
            try:
                tokens = run_sync(token_level(engine))
            except InfraError:
                tokens = True  # not an answer about token ids: the weight API refuses below
            if not tokens:
                raise ConfigError(
                    "engine",
                    f"openai ({run.engine_url})",
                    "answers with text or chat messages, not the sampled token ids and their "
                    "logprobs: re-tokenized text is not what the policy sampled",
                    "use --engine sglang (agentgym serve or SGLang), or --engine hf",
                )
        weights = Path(run.weights_dir) if run.weights_dir else out / "weights"
        policy = attach_server(trainer, engines, weights, sync=_group_sync(run))
        if fleet is not None:
            fleet.on_restart = policy.server_restarted
            policy.close_with(fleet.close)
        return policy
    except BaseException:
        for each in engines:
            run_sync(each.close())
        if fleet is not None:
            fleet.close()
        raise


def _launch(run: RunConfig, trainer: Any) -> Any:
    """The servers of ``run.launch``, started and answering (``servers.ServerFleet``)."""
    from agentgym.models import TINY_DIR
    from agentgym.recipes.servers import SGLANG_TEMPLATE, ServerFleet

    if trainer.backend.world_size > 1:
        raise ConfigError(
            "launch",
            run.launch,
            f"starts servers from one process, not from each of {trainer.backend.world_size} "
            "data-parallel ranks",
            "start the servers yourself and pass --engine-url",
        )
    devices = [d.strip() for d in (run.launch_devices or "").split(",") if d.strip()]
    fleet = ServerFleet(
        run.launch,
        model=str(run.model or TINY_DIR),
        template=run.launch_command or SGLANG_TEMPLATE,
        devices=devices,
    )
    fleet.start()
    return fleet


def _group_sync(run: RunConfig) -> Any:
    """The process group of ``run.weight_sync = "group"``; None for weights by disk."""
    if run.weight_sync != "group":
        return None
    from agentgym.trainers.group_sync import GroupSync

    backend = None if run.weight_sync_backend == "auto" else run.weight_sync_backend
    return GroupSync(
        backend=backend,
        bucket_bytes=run.weight_sync_bucket_mb * 2**20,
        master_address=run.weight_sync_address,
    )


def _training_env(run: RunConfig, world_size: int) -> tuple[Any, dict[str, Any]]:
    """``(env, env_kwargs)`` of the collector: the id and its arguments, or with Ray workers one
    vector env for the whole run (a collect call makes a vector env per call: with Ray, actors
    started every update); ``train_run`` closes it."""
    kwargs = {**run.env_kwargs, **run.train_env_kwargs}
    if run.env_workers is not None:
        kwargs["workers"] = run.env_workers
    if run.env_workers != "ray":
        return run.env, kwargs
    from agentgym.vector import AgentVectorEnv

    group = run.config.group_size
    num_envs = run.config.groups_per_batch // max(world_size, 1) * group
    return AgentVectorEnv.from_id(run.env, num_envs, group_size=group, **kwargs), {}


def _build(run: RunConfig, out: Path) -> tuple[Any, SourceBase]:
    """The trainer (policy from ``run.model``) and the collector on its engine
    (``colocated_engine``: on the trainer's device, sharing its weights, by default; a server
    with ``run.engine``, see ``_server_engine``)."""
    from agentgym import models
    from agentgym.trainers.colocate import colocated_engine
    from agentgym.trainers.trainer import make

    seed = run.seed if run.init == "random" else None
    model, tokenizer = models.load(run.model, seed=seed)
    backend_options: dict[str, Any] = {}
    if run.micro_batch_tokens is not None:
        backend_options["micro_batch_tokens"] = run.micro_batch_tokens
    backend_options["precision"] = run.precision
    if run.zero_stage is not None:
        backend_options["zero_stage"] = run.zero_stage
    trainer = make(
        run.algo,
        run.backend,
        policy=(model, tokenizer),
        config=run.config,
        options=run.options,
        **backend_options,
    )
    if run.engine == "hf":
        engine, _ = colocated_engine(trainer, run.engine_device, seed=run.seed)
    else:
        engine = _server_engine(run, trainer, out)
    if run.agent is not None:  # docs/gateway.md: an OpenAI-SDK agent program
        return trainer, _agent_source(run, engine, trainer)
    if is_multiagent(run.env):  # docs/multiagent.md: train some roles against the others
        return trainer, multiagent_source(run, engine, trainer.backend.world_size)
    env, env_kwargs = _training_env(run, trainer.backend.world_size)
    world_size = trainer.backend.world_size
    curriculum = _curriculum(run, world_size)
    # sync ranks all-gather their groups' outcomes (docs/curriculum.md); under max_staleness the
    # collection runs in a background thread, where no collective may: rank 0 logs its own
    sync_ranks = world_size > 1 and not run.config.max_staleness
    gather = trainer.backend.all_gather_object if sync_ranks else None
    source = CollectorSource(
        engine,
        env,
        group_size=run.config.group_size,
        seed=run.seed,
        env_kwargs=env_kwargs,
        max_turns=run.max_turns,
        history_turns=run.history_turns,
        scaffold=make_scaffold(run.scaffold, run.history_turns),
        action_choices=run.action_choices,
        temperature=run.config.temperature,
        max_tokens=run.config.max_new_tokens,
        curriculum=curriculum,
        on_records=TaskLog(out / "tasks.jsonl") if trainer.backend.rank == 0 else None,
        gather=gather,
    )
    if trainer.backend.world_size > 1:  # each rank plays its share of every batch
        from agentgym.rollout.collector_source import shard_size
        from agentgym.rollout.sharded_source import ShardedSource

        shard_size(run.config.groups_per_batch, trainer.backend.world_size)
        source.rank, source.world_size = trainer.backend.rank, trainer.backend.world_size
        return trainer, ShardedSource(source, trainer.backend)
    return trainer, source


def _agent_source(run: RunConfig, engine: Any, trainer: Any) -> SourceBase:
    from agentgym.gateway.source import AgentProgramSource

    if trainer.backend.world_size > 1:
        raise ConfigError(
            "agent", run.agent, "trains on one rank for now", "run it without --nproc/--nnodes"
        )
    return AgentProgramSource(
        engine,
        trainer.tokenizer,
        run.agent or "",
        run.tasks or "",
        group_size=run.config.group_size,
        reward=run.env if run.agent_reward == "env" else None,
        seed=run.seed,
        curriculum=None if run.curriculum == "uniform" else run.curriculum,
        curriculum_kwargs=run.curriculum_kwargs,
    )


def _curriculum(run: RunConfig, world_size: int) -> Any:
    """The run's curriculum over the training env's tasks (its declared difficulty levels)."""
    from agentgym.rollout.curriculum import Task, make_curriculum, task_set

    if run.curriculum == "uniform" and "tasks_per_level" not in run.curriculum_kwargs:
        return make_curriculum("uniform", [Task("all")], seed=run.seed, **run.curriculum_kwargs)
    if world_size > 1 and run.config.max_staleness and run.curriculum != "uniform":
        raise ConfigError(
            "curriculum",
            run.curriculum,
            "over several ranks with max_staleness >= 1: the ranks collect in background "
            "threads, where their groups' outcomes cannot be gathered, so their curricula "
            "would drift apart",
            "train with --set max_staleness=0, --curriculum uniform, or one process",
        )
    params = dict(run.curriculum_kwargs)
    per_level = params.pop("tasks_per_level", None)
    kwargs = {**run.env_kwargs, **run.train_env_kwargs}
    tasks = task_set(run.env, kwargs, tasks_per_level=per_level, seed=run.seed)
    return make_curriculum(run.curriculum, tasks, seed=run.seed, **params)


class TaskLog:
    """``tasks.jsonl``: one line per group played. A resumed run cuts the lines written after
    its checkpoint (the source's record count) before adding its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: int | None = None  # lines in the file, once read

    def __call__(self, records: list[dict[str, Any]], first: int) -> None:
        if self.lines != first:
            kept = self.path.read_text().splitlines()[:first] if self.path.is_file() else []
            self.path.write_text("".join(f"{line}\n" for line in kept))
            self.lines = len(kept)
        with self.path.open("a") as file:
            file.writelines(json.dumps(r, default=json_safe) + "\n" for r in records)
        self.lines += len(records)


def _guards(run: RunConfig) -> Any:
    """The run's failure-mode guards (``run.guards``); returns outside the env's registered
    reward range are checked only where the run plays the env with its default arguments
    (arguments may change the rewards)."""
    from agentgym.core.errors import RegistryError
    from agentgym.registry import env_info
    from agentgym.trainers.guards import Guards, GuardsConfig

    reward_range = None
    if not run.env_kwargs and not run.train_env_kwargs:
        try:
            reward_range = env_info(run.env).reward_range
        except RegistryError:  # an env registered elsewhere (gymnasium): no range to check
            reward_range = None
    return Guards(GuardsConfig.from_dict(run.guards), reward_range=reward_range)


def _trace(run: RunConfig, out: Path) -> Any:
    from agentgym.rollout.traces import Trace

    return Trace(out, run.trace, run.trace_budget_gb)


def trace_hint(run: RunConfig) -> str | None:
    """Where the run's trace is, the one line that reads it and the ``agentgym view`` command
    for the run (``--trace off``: that command only); ``agentgym train`` prints it last."""
    from agentgym.rollout.traces import parse_mode

    if run.out is None:
        return None
    view = f"see the run in a browser: agentgym view {shlex.quote(str(run.out))} (docs/view.md)"
    if parse_mode(run.trace).keep == "off":
        return view
    return (
        f"episode traces: {Path(run.out) / 'traces'} (docs/traces.md); read them with\n"
        f"  python -c \"from agentgym.rollout.traces import read; print(read('{run.out}'))\"\n"
        f"{view}"
    )


def _follow(run: RunConfig, trainer: Any, source: SourceBase, out: Path) -> dict[str, Any]:
    """A rank other than 0: trains beside rank 0, which owns the run folder's files, the
    progress display and the evaluations; returns an empty summary."""
    from agentgym.trainers.fit import fit

    stop = _StopFlag()
    try:
        with stop.installed():
            fit(
                trainer,
                source,
                steps=run.steps,
                out=out,
                checkpoint_every=run.checkpoint_every,
                resume=run.resume,
                should_stop=stop,
                guards=_guards(run),  # a rollback is collective: every rank takes it
                trace=_trace(run, out),  # rank 0 writes; every rank gathers logprobs
            )
    finally:
        run_sync(trainer.engine.close())
        source.close()  # a Ray vector env of the run's
    return {}


def _start_run(run: RunConfig) -> RunConfig:
    """The run as the evaluation before training sees it: its own number of episodes."""
    if run.start_eval_episodes is None:
        return run
    return dataclasses.replace(run, eval_episodes=run.start_eval_episodes)


def _evaluate(run: RunConfig, trainer: Any, task_options: Any = None) -> EvalResult:
    """The run's evaluation (``task_options``: one reset-options mapping per episode)."""
    if is_multiagent(run.env):
        return evaluate_roles(run, trainer.engine, EVAL_SEED + run.seed)
    return evaluate(
        trainer.engine,
        run.env,
        run.eval_episodes,
        seed=EVAL_SEED + run.seed,
        temperature=run.eval_temperature,
        max_tokens=run.config.max_new_tokens,
        env_kwargs=dict(run.env_kwargs),
        history_turns=run.history_turns,
        action_choices=run.action_choices,
        scaffold=make_scaffold(run.scaffold, run.history_turns),
        task_options=task_options,
    )


def _start_eval(run: RunConfig, trainer: Any, out: Path) -> dict[str, Any] | None:
    """Success before training, measured once per run folder (a resumed run reads it back)."""
    path = out / "start_eval.json"
    if path.is_file():
        return dict(json.loads(path.read_text()))
    run = _start_run(run)
    if run.eval_episodes <= 0:
        return None
    said: list[str] = []

    def evaluate() -> dict[str, Any]:
        started = time.perf_counter()
        result = _evaluate(run, trainer)
        result.refuse_unjudged("the evaluation before training")  # training would not either
        said.append("\n".join(result.lines()))
        return {**result.to_dict(), "eval_s": time.perf_counter() - started}

    if trainer.backend.world_size == 1:  # gathering the weights is a collective
        data = cached_evaluation(trainer.policy_state_dict, _eval_settings(run), evaluate)
    else:
        data = evaluate()
    path.write_text(json.dumps(data, indent=2))
    if not said:  # AGENTGYM_EVAL_CACHE held this policy's evaluation (recipes/eval_cache.py)
        said.append(f"success {data['success_rate']:.3f} (the same policy's, from the cache)")
    print(f"before training: {said[0]}", flush=True)
    return data


def _eval_settings(run: RunConfig) -> dict[str, Any]:
    """Everything besides the weights that the start evaluation's result depends on."""
    return {
        "env": run.env,
        "env_kwargs": dict(run.env_kwargs),
        "model": run.model,
        "engine": run.engine,
        "engine_url": run.engine_url,
        "episodes": run.eval_episodes,
        "seed": EVAL_SEED + run.seed,
        "temperature": run.eval_temperature,
        "max_tokens": run.config.max_new_tokens,
        "history_turns": run.history_turns,
        "action_choices": run.action_choices,
        "scaffold": run.scaffold,
        "roles": [run.train_roles, dict(run.role_policies)],
    }


def _time_to(out: Path, threshold: float) -> dict[str, float] | None:
    """The first update whose batch success reached ``threshold``, and the training time to it."""
    for line in (out / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("success_rate", 0.0) >= threshold:
            return {"step": row["step"], "train_s": row.get("elapsed_s", float("nan"))}
    return None


def _final_summary(run: RunConfig, trainer: Any, source: SourceBase, out: Path) -> dict:
    summary: dict[str, Any] = {"steps": trainer.step_count, "run": str(out)}
    summary["start"] = _start_eval(run, trainer, out)
    summary["first_batch_success_0.9"] = _time_to(out, 0.9)
    if run.eval_episodes > 0:
        started = time.perf_counter()
        result = _evaluate(run, trainer)
        unseen = result.only(lambda key: key is not None and key not in source.seen_tasks)
        summary["end"] = {**result.to_dict(), "eval_s": time.perf_counter() - started}
        summary["end_unseen_tasks"] = unseen.to_dict()
        summary["tasks_seen_in_training"] = len(source.seen_tasks)
        print("after training:  " + "\n".join(result.lines()))
        print(f"  unseen tasks:  {unseen.describe()}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def train_run(run: RunConfig) -> dict[str, Any]:
    """Train as ``run`` says; returns (and writes) the run's summary."""
    from agentgym.recipes.progress import RunMonitor
    from agentgym.recipes.run_folder import RunFolder
    from agentgym.trainers.fit import fit

    if run.out is None:
        raise ConfigError("out", None, "is not resolved", "build the run with resolve_run")
    out = Path(run.out)
    # an unknown env id or argument fails before a run folder is made or a model loads
    prepare_env(run.env, {**run.env_kwargs, **run.train_env_kwargs}, run.imports)
    _prepare_out(run, out)
    trainer, source = _build(run, out)
    if trainer.backend.rank != 0:
        return _follow(run, trainer, source, out)
    run_json = {"run": run.to_dict(), "config": trainer.config.to_dict()}
    (out / "run.json").write_text(json.dumps(run_json, indent=2, default=json_safe))
    print(f"run folder: {out}", flush=True)
    _start_eval(run, trainer, out)
    stop, guards = _StopFlag(), _guards(run)
    monitor = RunMonitor(
        out,
        total_steps=run.steps,
        title=f"{run.env} {run.algo}",
        show_bar=run.show_bar,
        wandb_project=run.wandb,
        wandb_config=run_json,
    )
    try:  # the engine is closed however the run ends (a server's client, an HFEngine's thread)
        with monitor, stop.installed():
            monitor.restart_clock()
            fit(
                trainer,
                source,
                steps=run.steps,
                out=out,
                checkpoint_every=run.checkpoint_every,
                resume=run.resume,
                on_metrics=monitor,
                recorder=RunFolder(out),  # metrics.jsonl, guards.jsonl (fit: checkpoints/)
                should_stop=stop,
                guards=guards,
                trace=_trace(run, out),  # traces/: every episode of every update
            )
            monitor.plot()
        summary = _final_summary(run, trainer, source, out)
    except NoTrainableEpisodes as error:  # the run stops: say why in its folder too
        failed = {"steps": trainer.step_count, "run": str(out), "error": str(error)}
        failed.update(dropped=error.causes, guards=guards.summary())
        (out / "summary.json").write_text(json.dumps(failed, indent=2))
        raise
    finally:
        run_sync(trainer.engine.close())
        source.close()  # a Ray vector env of the run's (_training_env)
    summary["stopped_early"] = stop.requested
    summary["guards"] = guards.summary()  # events: update, monitor, value, threshold, action
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    plot_curves(out, title=f"{run.env} {run.algo}")  # with the evaluations before and after
    return summary
