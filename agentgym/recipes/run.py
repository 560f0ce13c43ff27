"""A training run from start to summary: what ``agentgym train`` does.

::

    summary = train_run(RunSpec(env="agentgym/FrozenLake-v0", algo="grpo"))

The run folder ``out`` holds ``run.json`` (the spec and the resolved config), ``metrics.jsonl``,
``tensorboard/``, ``curves.png``, ``checkpoints/`` and, at the end, ``summary.json``: success
before training and after (Wilson 95% intervals), after also on tasks the run never trained on.
Ctrl-C stops after the running update, with a checkpoint; ``resume`` continues from it.
"""

from __future__ import annotations

import copy
import json
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError
from agentgym.recipes.defaults import training_defaults
from agentgym.recipes.report import EvalResult, evaluate
from agentgym.trainers.collector import CollectorSource

__all__ = ["RunSpec", "history_window", "train_run"]

EVAL_SEED = 1_000_000_000
"""Evaluation plays reset seeds from here on: far from the training seeds (``seed + group``)."""


@dataclass
class RunSpec:
    """Everything ``agentgym train`` needs; None fields take the env's training defaults."""

    env: str = "agentgym/FrozenLake-v0"
    algo: str = "grpo"
    backend: str = "torch"
    model: str | None = None
    steps: int | None = None
    out: str | None = None
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Env arguments for training and evaluation; ``run.json`` records them, and ``agentgym
    eval`` of the run's model plays the env with them."""
    config: dict[str, Any] = field(default_factory=dict)
    """Overrides of the algorithm's config fields (``--set name=value``)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Trainer options beside the algorithm (``--option name=value``): the fields of
    ``agentgym.trainers.TrainOptions``, e.g. ``{"warmup_steps": 10}``."""
    train_env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Env arguments of training episodes only, on top of ``env_kwargs`` (evaluation plays the
    env without them): e.g. ``{"hole_reward": -1}``."""
    max_turns: int | None = None
    """Most turns per training episode (evaluation uses the env's own limit)."""
    history_turns: int | str | None = None
    """The policy's history window, in training and evaluation: ``k`` (the system messages,
    the observation ``k`` turns back and the turns since; 0: the latest observation only) or
    ``"all"`` (the whole conversation). None: the env's training default."""
    init: str | None = None
    """Without ``model``: the tiny policy's starting weights, ``format`` (shipped, pre-trained
    on output formats only) or ``random`` (initialised from ``seed``; with action choices the
    policy needs no format). None: the env's training default."""
    action_choices: bool | None = None
    """Constrained decoding in training and evaluation: the policy samples only among the
    env's ``info["action_choices"]`` (FrozenLake's four moves), so it never writes an invalid
    action and RL learns only which action. None: the env's training default."""
    eval_episodes: int = 128
    eval_temperature: float = 1.0
    resume: bool = False
    checkpoint_every: int = 10
    micro_batch_tokens: int | None = None
    wandb: str | None = None
    show_bar: bool = True

    def resolved(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(algorithm config, run settings)``: the env's defaults under the spec's values."""
        defaults = training_defaults(self.env, self.algo)
        config = {**defaults.config, **self.config, "seed": self.seed}
        if not isinstance(self.train_env_kwargs, dict):
            raise ConfigError(
                "train_env_kwargs", self.train_env_kwargs, "is not a mapping", "pass e.g. {}"
            )
        if not isinstance(self.env_kwargs, dict):
            raise ConfigError("env_kwargs", self.env_kwargs, "is not a mapping", "pass e.g. {}")
        if not isinstance(self.options, dict):
            raise ConfigError(
                "options", self.options, "is not a mapping", "pass e.g. {'warmup_steps': 10}"
            )
        from agentgym.trainers.config import TrainOptions

        options = {**defaults.options, **self.options}
        TrainOptions.from_dict(options)  # a bad option fails here, before any folder
        run = {
            "steps": self.steps or defaults.steps,
            "env_kwargs": {**defaults.env_kwargs, **self.env_kwargs},
            "train_env_kwargs": {**defaults.train_env_kwargs, **self.train_env_kwargs},
            "options": options,
            "max_turns": self.max_turns or defaults.max_turns,
            "micro_batch_tokens": self.micro_batch_tokens or defaults.micro_batch_tokens,
            "history_turns": (
                defaults.history_turns
                if self.history_turns is None
                else history_window(self.history_turns)
            ),
            "init": _init(self.init, defaults.init, self.model),
            "action_choices": _flag("action_choices", self.action_choices, defaults.action_choices),
        }
        return config, run

    def out_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        name = self.env.split("/")[-1]
        return Path("runs") / f"{name}-{self.algo}-{time.strftime('%Y%m%d-%H%M%S')}"


def _init(value: str | None, default: str, model: str | None) -> str | None:
    if value not in (None, "format", "random"):
        raise ConfigError("init", value, "must be 'format' or 'random'", "pass --init random")
    if model is not None:
        if value is not None:
            raise ConfigError(
                "init", value, "applies to the tiny policy only", "drop --init with --model"
            )
        return None
    return value or default


def _flag(name: str, value: object, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(name, value, "must be true or false", f"pass {name} = true")
    return value


def history_window(value: int | str) -> int | None:
    """``"all"`` -> None (the whole conversation); ``k`` or ``"k"`` (k >= 0) -> k."""
    if value == "all":
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise ConfigError(
            "history_turns",
            value,
            "must be an int >= 0 or 'all'",
            "pass e.g. --history-turns 0 (the latest observation) or --history-turns all",
        )
    return int(text)


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


def _prepare_out(spec: RunSpec, out: Path) -> None:
    has_checkpoints = any((out / "checkpoints").glob("step-*"))
    if has_checkpoints and not spec.resume:
        raise ConfigError(
            "--out",
            str(out),
            "already holds a run's checkpoints",
            "pass --resume to continue it, or a new --out",
        )
    if spec.resume and not (out / "run.json").is_file():
        raise ConfigError("--resume", str(out), "holds no run.json", "point --out at a run")
    out.mkdir(parents=True, exist_ok=True)


def _build(spec: RunSpec, config: dict[str, Any], run: dict[str, Any]) -> tuple[Any, Any]:
    """The trainer (policy from ``spec.model``) and the collector on an engine of its own."""
    from agentgym import models
    from agentgym.inference import HFEngine
    from agentgym.trainers.trainer import make

    seed = spec.seed if run["init"] == "random" else None
    model, tokenizer = models.load(spec.model, seed=seed)
    engine = HFEngine(copy.deepcopy(model), tokenizer, seed=spec.seed)
    backend_options = {}
    if run["micro_batch_tokens"] is not None:
        backend_options["micro_batch_tokens"] = run["micro_batch_tokens"]
    trainer = make(
        spec.algo,
        spec.backend,
        policy=(model, tokenizer),
        config=config,
        options=run["options"],
        engine=engine,
        **backend_options,
    )
    c = trainer.config
    source = CollectorSource(
        engine,
        spec.env,
        group_size=c.group_size,
        seed=spec.seed,
        env_kwargs={**run["env_kwargs"], **run["train_env_kwargs"]},
        max_turns=run["max_turns"],
        history_turns=run["history_turns"],
        action_choices=run["action_choices"],
        temperature=c.temperature,
        max_tokens=c.max_new_tokens,
    )
    return trainer, source


def _evaluate(spec: RunSpec, trainer: Any) -> EvalResult:
    run = spec.resolved()[1]
    return evaluate(
        trainer.engine,
        spec.env,
        spec.eval_episodes,
        seed=EVAL_SEED + spec.seed,
        temperature=spec.eval_temperature,
        max_tokens=trainer.config.max_new_tokens,
        env_kwargs=run["env_kwargs"],
        history_turns=run["history_turns"],
        action_choices=run["action_choices"],
    )


def _start_eval(spec: RunSpec, trainer: Any, out: Path) -> dict[str, Any] | None:
    """Success before training, measured once per run folder (a resumed run reads it back)."""
    path = out / "start_eval.json"
    if path.is_file():
        return dict(json.loads(path.read_text()))
    if spec.eval_episodes <= 0:
        return None
    started = time.perf_counter()
    result = _evaluate(spec, trainer)
    data = {**result.to_dict(), "eval_s": time.perf_counter() - started}
    path.write_text(json.dumps(data, indent=2))
    print(f"before training: {result.describe()}", flush=True)
    return data


def _time_to(out: Path, threshold: float) -> dict[str, float] | None:
    """The first update whose batch success reached ``threshold``, and the training time to it."""
    for line in (out / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("success_rate", 0.0) >= threshold:
            return {"step": row["step"], "train_s": row.get("elapsed_s", float("nan"))}
    return None


def _final_summary(spec: RunSpec, trainer: Any, source: CollectorSource, out: Path) -> dict:
    summary: dict[str, Any] = {"steps": trainer.step_count, "run": str(out)}
    summary["start"] = _start_eval(spec, trainer, out) if spec.eval_episodes > 0 else None
    summary["first_batch_success_0.9"] = _time_to(out, 0.9)
    if spec.eval_episodes > 0:
        started = time.perf_counter()
        result = _evaluate(spec, trainer)
        unseen = result.only(lambda key: key is not None and key not in source.seen_tasks)
        summary["end"] = {**result.to_dict(), "eval_s": time.perf_counter() - started}
        summary["end_unseen_tasks"] = unseen.to_dict()
        summary["tasks_seen_in_training"] = len(source.seen_tasks)
        print(f"after training:  {result.describe()}")
        print(f"  unseen tasks:  {unseen.describe()}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def train_run(spec: RunSpec) -> dict[str, Any]:
    """Train as ``spec`` says; returns (and writes) the run's summary."""
    from agentgym.recipes.progress import RunMonitor
    from agentgym.trainers.fit import fit

    out = spec.out_dir()
    config, run = spec.resolved()  # a bad setting fails before the run folder is made
    _prepare_out(spec, out)
    trainer, source = _build(spec, config, run)
    run_json = {"spec": asdict(spec), "config": trainer.config.to_dict(), "run": run}
    (out / "run.json").write_text(json.dumps(run_json, indent=2, default=str))
    print(f"run folder: {out}", flush=True)
    _start_eval(spec, trainer, out)
    stop = _StopFlag()
    monitor = RunMonitor(
        out,
        total_steps=run["steps"],
        title=f"{spec.env} {spec.algo}",
        show_bar=spec.show_bar,
        wandb_project=spec.wandb,
        wandb_config=run_json,
    )
    with monitor, stop.installed():
        monitor.restart_clock()
        fit(
            trainer,
            source,
            steps=run["steps"],
            out=out,
            checkpoint_every=spec.checkpoint_every,
            resume=spec.resume,
            on_metrics=monitor,
            should_stop=stop,
        )
        monitor.plot()
    try:
        summary = _final_summary(spec, trainer, source, out)
    finally:
        run_sync(trainer.engine.close())
    summary["stopped_early"] = stop.requested
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
