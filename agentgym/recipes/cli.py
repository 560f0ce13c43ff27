"""``agentgym train`` and ``agentgym eval``.

::

    agentgym train --env agentgym/FrozenLake-v0 --algo grpo --out runs/fl
    agentgym train --config run.toml --set learning_rate=1e-3 --steps 60
    agentgym train --out runs/fl --resume
    agentgym eval --env agentgym/FrozenLake-v0 --model runs/fl/checkpoints/step-00000040 --json

A config file (TOML, or JSON) holds the same names as the flags (``env``, ``algo``, ``steps``,
``env_kwargs``, ...), a ``[config]`` table of algorithm fields and an ``[options]`` table of
trainer options (``warmup_steps``, ``adam_eps``, ...); flags given on the command line win over
the file.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from agentgym.core.errors import ConfigError

__all__ = ["add_eval_arguments", "add_train_arguments", "run_eval", "run_train"]

DEFAULT_ENV = "agentgym/FrozenLake-v0"


def _pairs(values: list[str], flag: str) -> dict[str, Any]:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}`` (values read as JSON when they parse)."""
    result: dict[str, Any] = {}
    for pair in values:
        key, sep, text = pair.partition("=")
        if not sep or not key.isidentifier():
            raise ConfigError(flag, pair, "is not KEY=VALUE", f"write e.g. {flag} name=1e-3")
        try:
            result[key] = json.loads(text)
        except json.JSONDecodeError:
            result[key] = text
    return result


def _kwargs(text: str | None, flag: str = "--env-kwargs") -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return _pairs(text.split(","), flag)
    if not isinstance(value, dict):
        raise ConfigError(flag, text, "is not a JSON object", "use '{\"size\": 5}'")
    return value


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``agentgym train``'s flags (every default None: the file or the env decides)."""
    add = parser.add_argument
    add("--config", type=Path, help="a run file (.toml or .json); flags override its values")
    add("--env", help=f"env id (default {DEFAULT_ENV})")
    add("--algo", choices=["grpo", "ppo", "dapo"], help="algorithm (default grpo)")
    add("--backend", choices=["torch", "deepspeed"], help="training backend (default torch)")
    add("--model", help="a local model directory (default: the tiny policy)")
    add(
        "--init",
        choices=["format", "random"],
        help="without --model: the tiny policy's weights, as shipped (format: pre-trained on "
        "output formats only) or initialised from --seed (default: the env's; FrozenLake: random)",
    )
    add("--steps", type=int, help="training updates (default: the env's training default)")
    add("--out", help="run folder (default runs/<env>-<algo>-<time>)")
    add("--seed", type=int, help="seed of sampling, task order and evaluation (default 0)")
    add("--env-kwargs", help="env arguments, JSON ('{\"size\": 5}') or k=v,k=v")
    add(
        "--train-env-kwargs",
        help="env arguments of training episodes only, on top of --env-kwargs; evaluation "
        "plays the env without them (default: none)",
    )
    add("--max-turns", type=int, help="most turns per training episode (default: env's)")
    add(
        "--history-turns",
        metavar="K|all",
        help="the policy's context: the latest observation and K turns before it, or all "
        "(default: the env's training default)",
    )
    add(
        "--action-choices",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="sample only among the env's info['action_choices'] (constrained decoding), in "
        "training and evaluation (default: the env's training default; FrozenLake: on)",
    )
    add(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="an algorithm config field, e.g. --set learning_rate=1e-3 (repeatable)",
    )
    add(
        "--option",
        dest="option_pairs",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a trainer option beside the algorithm (warmup_steps, decay_steps, min_lr_ratio, "
        "adam_eps, adam_betas, weight_decay, old_logprobs, critic_learning_rate), e.g. "
        "--option warmup_steps=10",
    )
    add("--eval-episodes", type=int, help="episodes of the start and end evaluations (0: none)")
    add("--eval-temperature", type=float, help="sampling temperature of evaluations (default 1)")
    add("--checkpoint-every", type=int, help="updates between checkpoints (default 10)")
    add("--micro-batch-tokens", type=int, help="token budget of a training micro-batch")
    add("--resume", action="store_true", default=None, help="continue the run in --out")
    add("--wandb", metavar="PROJECT", help="also log to Weights & Biases (needs wandb)")
    add("--no-progress", dest="show_bar", action="store_false", default=None, help="no bar")


def _read_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    if not path.is_file():
        raise ConfigError("--config", str(path), "is not a file", "pass a .toml or .json file")
    text = path.read_text()
    data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    return {key.replace("-", "_"): value for key, value in data.items()}


def spec_from_args(args: argparse.Namespace) -> Any:
    """The ``RunSpec`` of ``args``: the config file's values under the flags given."""
    from agentgym.recipes.run import RunSpec

    merged = _read_file(args.config)
    flags = {k: v for k, v in vars(args).items() if v is not None and k not in ("config",)}
    flags.pop("command", None)
    overrides = _pairs(flags.pop("overrides", []), "--set")
    options = _pairs(flags.pop("option_pairs", []), "--option")
    if "env_kwargs" in flags:
        flags["env_kwargs"] = _kwargs(flags["env_kwargs"])
    if "train_env_kwargs" in flags:
        flags["train_env_kwargs"] = _kwargs(flags["train_env_kwargs"], "--train-env-kwargs")
    merged.update(flags)
    merged["config"] = {**merged.get("config", {}), **overrides}
    merged["options"] = {**merged.get("options", {}), **options}
    names = {f.name for f in fields(RunSpec)}
    unknown = sorted(set(merged) - names)
    if unknown:
        raise ConfigError("--config", unknown, "are not run settings", f"use: {sorted(names)}")
    return RunSpec(**merged)


def run_train(args: argparse.Namespace) -> int:
    from agentgym.recipes.run import train_run

    try:
        spec = spec_from_args(args)
        summary = train_run(spec)
    except ConfigError as error:
        print(f"agentgym train: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("agentgym train: interrupted", file=sys.stderr)
        return 130
    print(json.dumps(summary, indent=2))
    return 0


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``agentgym eval``'s flags."""
    add = parser.add_argument
    add("--env", default=DEFAULT_ENV, help=f"env id (default {DEFAULT_ENV})")
    add(
        "--model",
        help="a model directory or a run's checkpoint (default: the tiny policy as shipped)",
    )
    add("--episodes", type=int, default=128, help="episodes to play (default 128)")
    add("--seed", type=int, default=1_000_000_000, help="first reset seed (default 1e9)")
    add("--temperature", type=float, default=1.0, help="sampling temperature; 0: greedy")
    add("--max-tokens", type=int, default=16, help="most tokens per turn (default 16)")
    add("--env-kwargs", help="env arguments, JSON ('{\"size\": 5}') or k=v,k=v")
    add(
        "--history-turns",
        metavar="K|all",
        help="the policy's context: the latest observation and K turns before it, or all "
        "(default: as the run that trained --model, else all)",
    )
    add(
        "--action-choices",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="sample only among the env's info['action_choices'] (default: as the run that "
        "trained --model, else off)",
    )
    add("--json", action="store_true", help="print a JSON object instead of text")


def _model_dir(path: str | None) -> str | None:
    """A run folder means its newest checkpoint; a checkpoint folder holds the model itself."""
    if path is None:
        return None
    from agentgym.trainers.checkpoint import find_latest

    folder = Path(path)
    if (folder / "checkpoints").is_dir():
        latest = find_latest(folder / "checkpoints")
        if latest is not None:
            return str(latest)
    return path


def _trained_run(path: str | None) -> dict[str, Any]:
    """The run settings (``run.json``'s ``run``: history window, env arguments) of the run that
    trained the model at ``path`` (a run folder or one of its checkpoints); {} otherwise."""
    if path is None:
        return {}
    folder = Path(path)
    for candidate in (folder, folder.parent.parent):
        run_json = candidate / "run.json"
        if run_json.is_file():
            data = json.loads(run_json.read_text())
            return {**data.get("run", {}), "env": data.get("spec", {}).get("env")}
    return {}


def _trained_env_kwargs(trained: dict[str, Any], env: str) -> dict[str, Any]:
    """The env arguments the run trained with, when it trained on ``env``: a policy trained on
    ``tool=False`` prompts is evaluated on them."""
    return dict(trained.get("env_kwargs") or {}) if trained.get("env") == env else {}


def run_eval(args: argparse.Namespace) -> int:
    from agentgym import models
    from agentgym.core.aio import run_sync
    from agentgym.inference import HFEngine
    from agentgym.recipes.report import evaluate

    try:
        if args.episodes < 1:
            raise ConfigError("--episodes", args.episodes, "must be >= 1", "use e.g. 128")
        from agentgym.recipes.run import history_window

        trained = _trained_run(args.model)
        if args.history_turns is None:
            history = trained.get("history_turns")
        else:
            history = history_window(args.history_turns)
        choices = args.action_choices
        if choices is None:
            choices = bool(trained.get("action_choices", False))
        model, tokenizer = models.load(_model_dir(args.model))
        engine = HFEngine(model, tokenizer, seed=args.seed)
        env_kwargs = {**_trained_env_kwargs(trained, args.env), **_kwargs(args.env_kwargs)}
        result = evaluate(
            engine,
            args.env,
            args.episodes,
            seed=args.seed,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            env_kwargs=env_kwargs,
            history_turns=history,
            action_choices=choices,
        )
        run_sync(engine.close())
    except ConfigError as error:
        print(f"agentgym eval: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        report = {
            "env": args.env,
            "model": args.model,
            "history_turns": history,
            "action_choices": choices,
            "env_kwargs": env_kwargs,
        }
        print(json.dumps({**report, **result.to_dict()}, indent=2))
    else:
        print(f"{args.env}: {result.describe()}")
    return 0
