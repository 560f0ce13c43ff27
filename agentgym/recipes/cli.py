"""``agentgym train`` and ``agentgym eval``.

::

    agentgym train --env agentgym/FrozenLake-v0 --algo grpo --out runs/fl
    agentgym train --config run.toml --set learning_rate=1e-3 --steps 60
    agentgym train --out runs/fl --resume
    agentgym eval --env agentgym/FrozenLake-v0 --model runs/fl/checkpoints/step-00000040 --json

A run file (TOML, or JSON) holds the same names as the flags (``env``, ``algo``, ``steps``,
``env_kwargs``, ...), a ``[config]`` table of algorithm fields and an ``[options]`` table of
trainer options (``warmup_steps``, ``adam_eps``, ...): the format of the shipped recipes
(``agentgym/recipes/<family>/<algo>.toml``), which lie under it. Flags win over the file.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import sys
import tomllib
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from agentgym.core.errors import ConfigError, RegistryError
from agentgym.core.keyvalue import parse_kwargs, parse_pairs
from agentgym.recipes.config import (
    Layer,
    RunConfig,
    recipe_names,
    resolve_run,
)

__all__ = [
    "add_train_arguments",
    "run_from_args",
    "run_train",
]


# A mapping flag takes KEY=VALUE items and JSON objects (agentgym.core.keyvalue), repeatable.
_MAPPING: dict[str, Any] = {"action": "extend", "nargs": "+", "metavar": "KEY=VALUE|JSON"}

# Each flag sets the run field of the same name; its help is the field's docstring.
_TRAIN_FLAGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("--env", "env", {"metavar": "ID|MODULE:ID"}),
    ("--import", "imports", {"action": "append", "metavar": "MODULE"}),
    ("--algo", "algo", {"choices": ["grpo", "ppo", "dapo"]}),
    ("--backend", "backend", {"choices": ["torch", "deepspeed"]}),
    ("--model", "model", {}),
    ("--init", "init", {"choices": ["format", "random"]}),
    ("--steps", "steps", {"type": int}),
    ("--out", "out", {}),
    ("--seed", "seed", {"type": int}),
    ("--env-kwargs", "env_kwargs", _MAPPING),
    ("--train-env-kwargs", "train_env_kwargs", _MAPPING),
    ("--curriculum", "curriculum", {"choices": ["uniform", "schedule", "adaptive"]}),
    ("--curriculum-kwargs", "curriculum_kwargs", _MAPPING),
    ("--env-workers", "env_workers", {"choices": ["thread", "process", "ray"]}),
    ("--max-turns", "max_turns", {"type": int}),
    ("--history-turns", "history_turns", {"metavar": "K|all"}),
    ("--scaffold", "scaffold", {"choices": ["default", "react", "memory"]}),
    ("--action-choices", "action_choices", {"action": argparse.BooleanOptionalAction}),
    ("--train-roles", "train_roles", {"metavar": "ROLE,..."}),
    ("--role-policies", "role_policies", {**_MAPPING, "metavar": "ROLE=NAME|JSON"}),
    ("--eval-episodes", "eval_episodes", {"type": int}),
    ("--start-eval-episodes", "start_eval_episodes", {"type": int}),
    ("--eval-temperature", "eval_temperature", {"type": float}),
    ("--checkpoint-every", "checkpoint_every", {"type": int}),
    ("--agent", "agent", {"metavar": "MODULE:FUNCTION"}),
    ("--tasks", "tasks", {"metavar": "TASKS.JSONL"}),
    ("--agent-reward", "agent_reward", {"choices": ["program", "env"]}),
    ("--micro-batch-tokens", "micro_batch_tokens", {"type": int}),
    ("--precision", "precision", {"choices": ["auto", "fp32", "bf16"]}),
    ("--zero-stage", "zero_stage", {"type": int}),
    ("--engine-device", "engine_device", {"metavar": "auto|cpu|cuda|cuda:N"}),
    ("--engine", "engine", {"choices": ["hf", "sglang", "openai"]}),
    ("--engine-url", "engine_url", {"action": "append", "metavar": "URL"}),
    ("--weights-dir", "weights_dir", {"metavar": "DIR"}),
    ("--launch", "launch", {"type": int, "metavar": "N"}),
    ("--launch-command", "launch_command", {"metavar": "TEMPLATE"}),
    ("--launch-devices", "launch_devices", {"metavar": "D,..."}),
    ("--weight-sync", "weight_sync", {"choices": ["disk", "group"]}),
    ("--weight-sync-backend", "weight_sync_backend", {"choices": ["auto", "gloo", "nccl"]}),
    ("--weight-sync-bucket-mb", "weight_sync_bucket_mb", {"type": int}),
    ("--weight-sync-address", "weight_sync_address", {"metavar": "HOST"}),
    ("--resume", "resume", {"action": "store_true"}),
    ("--wandb", "wandb", {"metavar": "PROJECT"}),
    ("--no-progress", "show_bar", {"action": "store_false"}),
    ("--guards", "guards", {"choices": ["default", "off"]}),
    ("--trace", "trace", {"metavar": "all|sample:N|off"}),
    ("--trace-budget-gb", "trace_budget_gb", {"type": float, "metavar": "GB"}),
)


_MAPPING_FLAGS = ("env_kwargs", "train_env_kwargs", "curriculum_kwargs", "role_policies")


# Shortcuts for fields of the run file's tables: each flag sets ``table.field`` (a [config]
# field as --set does, an [options] field as --option does); its help is the field's docstring.
_TABLE_FLAGS: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("--group-size", "config", "group_size", {"type": int}),
    ("--batch-size", "config", "batch_size", {"type": int}),
    ("--max-new-tokens", "config", "max_new_tokens", {"type": int}),
    (
        "--gradient-checkpointing",
        "options",
        "gradient_checkpointing",
        {"action": argparse.BooleanOptionalAction},
    ),
    ("--lora-rank", "options", "lora_rank", {"type": int}),
    ("--lora-alpha", "options", "lora_alpha", {"type": float}),
    ("--lora-targets", "options", "lora_targets", {"metavar": "all-linear|NAME,..."}),
)
_TABLE_CLASSES = {"config": "TrainerConfig", "options": "TrainOptions"}


def _table_help(table: str, name: str) -> str:
    """The docstring of ``name`` in the class behind ``table``, read from the source of
    ``agentgym/trainers/config.py`` without importing it (``--help`` needs no torch)."""
    import agentgym

    source = Path(agentgym.__file__).parent / "trainers" / "config.py"
    (klass,) = [
        node
        for node in ast.parse(source.read_text()).body
        if isinstance(node, ast.ClassDef) and node.name == _TABLE_CLASSES[table]
    ]
    text, default = "", "the algorithm preset's"
    for node, following in itertools.pairwise(klass.body):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name:
            text = " ".join(str(getattr(following, "value", ast.Constant("")).value).split())
            if table == "options" and node.value is not None:
                default = f"default {ast.unparse(node.value)}"
    return f"{text} [{table}.{name}; {default}]".replace("%", "%%")


def _field_help(name: str) -> str:
    """``RunConfig``'s docstring of ``name`` with its run-file key and its default."""
    (f,) = [f for f in fields(RunConfig) if f.name == name]
    default = f.default_factory() if f.default is MISSING else f.default  # type: ignore[operator]
    text = f"{RunConfig.field_help()[name]} [{name}; default {json.dumps(default)}]"
    return text.replace("%", "%%")  # argparse formats help with %


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``agentgym train``'s flags (every default None: a lower layer decides)."""
    parser.epilog = (
        "Settings, lowest first: the recipe of (env, algo) where one is shipped ("
        + "; ".join(recipe_names())
        + "), with --resume the run's own run.json, the --config file, then these flags; "
        "a recipe's values replace the defaults shown. Every field and option: "
        "docs/configuration.md."
    )
    add = parser.add_argument
    add("--config", type=Path, help="a run file (.toml or .json); flags override its values")
    for flag, name, kwargs in _TRAIN_FLAGS:
        add(flag, dest=name, default=None, help=_field_help(name), **kwargs)
    for flag, table, name, kwargs in _TABLE_FLAGS:
        shown = {} if "action" in kwargs else {"metavar": name.upper()}
        help_text = _table_help(table, name)
        add(flag, dest=f"{table}_{name}", default=None, help=help_text, **shown | kwargs)
    add(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="an algorithm config field (the run file's [config] table), e.g. --set "
        "learning_rate=1e-3; null for None (repeatable)",
    )
    add(
        "--option",
        dest="option_pairs",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a trainer option beside the algorithm (the run file's [options] table: "
        "warmup_steps, decay_steps, min_lr_ratio, adam_eps, adam_betas, weight_decay, "
        "old_logprobs, critic_learning_rate, logits_chunk, ...), e.g. --option "
        "warmup_steps=10 (repeatable)",
    )
    from agentgym.recipes.launch import add_launch_arguments

    add_launch_arguments(parser)


def _read_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    if not path.is_file():
        raise ConfigError("--config", str(path), "is not a file", "pass a .toml or .json file")
    text = path.read_text()
    try:
        return dict(json.loads(text) if path.suffix == ".json" else tomllib.loads(text))
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError("--config", str(path), f"does not parse: {error}", "fix it") from None


def _recorded_settings(data: dict[str, Any]) -> dict[str, Any]:
    """The run settings a ``run.json`` holds, in the run-file format; ``spec`` and ``run``
    of the first layout (before run.json held the whole resolved run) read too."""
    if "spec" not in data:
        return dict(data.get("run", {}))
    spec, run = data["spec"], data.get("run", {})
    given = {k: v for k, v in spec.items() if v is not None and k not in ("config", "options")}
    config = {k: v for k, v in data.get("config", {}).items() if k not in ("algo", "seed")}
    return {**given, **run, "config": config}


def _resumed(layers: list[Layer]) -> Layer | None:
    """With ``resume``, the settings recorded in the run folder's ``run.json``."""
    given = {k: v for layer in layers for k, v in layer.values.items()}
    if not given.get("resume") or not given.get("out"):
        return None
    path = Path(given["out"]) / "run.json"
    if not path.is_file():
        return None  # train_run says that it is not a run
    recorded = _recorded_settings(json.loads(path.read_text()))
    per_call = ("out", "resume", "show_bar", "wandb")
    return Layer(str(path), {k: v for k, v in recorded.items() if k not in per_call})


def run_from_args(args: argparse.Namespace) -> RunConfig:
    """The run that ``args`` describe: the recipe, with --resume the run's recorded settings,
    the --config file, then the flags (each later layer over the ones before)."""
    layers = []
    if args.config is not None:
        layers.append(Layer(str(args.config), _read_file(args.config)))
    for flag, name, _ in _TRAIN_FLAGS:
        value = getattr(args, name, None)
        if value is not None and name in _MAPPING_FLAGS:
            value = parse_kwargs(value, flag)
        if value is not None and name == "guards":  # a run file's [guards] table stays
            value = {"enabled": value == "default"}
        if value is not None:
            layers.append(Layer(flag, {name: value}))
    for flag, table, name, _ in _TABLE_FLAGS:
        value = getattr(args, f"{table}_{name}", None)
        if value is not None:
            layers.append(Layer(flag, {table: {name: value}}))
    if args.overrides:
        layers.append(Layer("--set", {"config": parse_pairs(args.overrides, "--set")}))
    if args.option_pairs:
        layers.append(Layer("--option", {"options": parse_pairs(args.option_pairs, "--option")}))
    resumed = _resumed(layers)
    return resolve_run(*([resumed] if resumed else []), *layers)


def run_train(args: argparse.Namespace) -> int:
    from agentgym.registry.lookup import prepare_env

    try:  # an unknown env or env argument fails here: nothing loaded, no run folder made
        run = run_from_args(args)
        prepare_env(run.env, {**run.env_kwargs, **run.train_env_kwargs}, run.imports)
    except (ConfigError, RegistryError) as error:
        print(f"agentgym train: error: {error}", file=sys.stderr)
        return 2
    from agentgym.recipes.launch import launch_train, wants_launch
    from agentgym.recipes.run import trace_hint, train_run

    if wants_launch(args):  # --nproc / --nnodes: torchrun starts the workers
        return launch_train(args, run_from_args)
    from agentgym.core.errors import NoTrainableEpisodes
    from agentgym.recipes.report import NothingJudged
    from agentgym.trainers.weight_sync import InferenceServerError

    try:
        summary = train_run(run)
    except ConfigError as error:
        print(f"agentgym train: error: {error}", file=sys.stderr)
        return 2
    except (InferenceServerError, NoTrainableEpisodes) as error:  # checkpoints intact: --resume
        print(f"agentgym train: error: {error}", file=sys.stderr)
        return 1
    except NothingJudged as error:  # the start evaluation could not judge: nor could training
        print(f"agentgym train: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("agentgym train: interrupted", file=sys.stderr)
        return 130
    print(json.dumps(summary, indent=2))
    if (hint := trace_hint(run)) is not None:
        print(hint)
    return 0


def _trained_run(path: str | None) -> dict[str, Any]:
    """The settings (env, history window, env arguments, ...) of the run that trained the
    model at ``path`` (a run folder or one of its checkpoints), from its ``run.json``; {}
    otherwise."""
    if path is None:
        return {}
    folder = Path(path)
    for candidate in (folder, folder.parent.parent):
        run_json = candidate / "run.json"
        if run_json.is_file():
            return _recorded_settings(json.loads(run_json.read_text()))
    return {}


def _trained_env_kwargs(trained: dict[str, Any], env: str) -> dict[str, Any]:
    """The env arguments the run trained with, when it trained on ``env``: a policy trained on
    ``tool=False`` prompts is evaluated on them."""
    return dict(trained.get("env_kwargs") or {}) if trained.get("env") == env else {}
