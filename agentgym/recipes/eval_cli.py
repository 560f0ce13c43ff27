"""``agentgym eval``: any model (in-process, or served over OpenAI's or SGLang's API) on any
env, n samples per task, pass@k, per-episode JSONL and a summary table.

::

    agentgym eval --env agentgym/FrozenLake-v0 --model runs/fl --episodes 256
    agentgym eval --env agentgym/Math-v0 --engine openai --engine-url http://127.0.0.1:8000 \\
        --model Qwen/Qwen3-0.6B --tasks 100 -n 4 --pass-k 1,4 --output math.jsonl

The engine flags are ``agentgym.recipes.engines``'s (shared with ``agentgym train``); the
scoring is ``agentgym.recipes.evaluation``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agentgym.core.errors import ConfigError, InfraError, RegistryError
from agentgym.core.keyvalue import parse_kwargs
from agentgym.recipes.cli import _trained_env_kwargs, _trained_run
from agentgym.recipes.config import DEFAULT_ENV, history_window

__all__ = ["add_eval_arguments", "run_eval"]


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``agentgym eval``'s flags (the engine flags: ``agentgym.recipes.engines``)."""
    from agentgym.recipes.engines import add_engine_arguments
    from agentgym.registry.lookup import add_env_arguments

    parser.epilog = (
        "A served model: --engine openai --engine-url URL --model NAME (vLLM, SGLang, agentgym "
        "serve, a hosted API; the key from $OPENAI_API_KEY or --api-key-env, never printed). A "
        "server that returns no token ids (most hosted APIs) is evaluated through its chat API: "
        "the server renders the prompt, which evaluation allows (training does not). "
        "Guide: docs/evaluation.md."
    )
    add = parser.add_argument
    add(
        "--env",
        default=None,
        help=f"env id (default: the env of the run that trained --model, else {DEFAULT_ENV})",
    )
    add_engine_arguments(parser)
    add("--episodes", type=int, default=None, help="episodes in all (default 128): --tasks x -n")
    add("--tasks", type=int, default=None, help="tasks to play (default: --episodes / -n)")
    add("-n", "--samples", type=int, default=1, help="episodes per task (default 1)")
    add(
        "--pass-k",
        metavar="K,...",
        default=None,
        help="pass@k to report, each k <= -n (unbiased estimator; default: 1 and n)",
    )
    add("--seed", type=int, default=1_000_000_000, help="first reset seed (default 1e9)")
    add("--temperature", type=float, default=1.0, help="sampling temperature; 0: greedy")
    add(
        "--max-tokens",
        type=int,
        default=None,
        help="most new tokens per turn (default: the env family's, e.g. FrozenLake 16, Math "
        "and Code 1024; agentgym.recipes.evaluation.TURN_TOKENS)",
    )
    add("--concurrency", type=int, default=64, help="episodes played at once (default 64)")
    add_env_arguments(parser)
    add(
        "--history-turns",
        metavar="K|all",
        help="the policy's context: the latest observation and K turns before it, or all "
        "(default: as the run that trained --model, else all)",
    )
    add(
        "--scaffold",
        choices=["default", "react", "memory"],
        help="how observations become the prompt (docs/scaffolds.md; default: as the run that "
        "trained --model, else default)",
    )
    add(
        "--action-choices",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="sample only among the env's info['action_choices'] (default: as the run that "
        "trained --model, else off; --engine hf only)",
    )
    add(
        "--output",
        metavar="FILE",
        help="write one JSON line per episode (messages, reward, ...), and the episodes' trace "
        "(tokens, masks, logprobs: docs/traces.md) to the folder FILE.traces",
    )
    add(
        "--trace",
        default="all",
        metavar="all|sample:N|off",
        help="what the trace beside --output keeps: every episode (default), the first N "
        "tasks' samples, or nothing",
    )
    add("--json", action="store_true", help="print a JSON object instead of text")


def _counts(args: argparse.Namespace) -> tuple[int, int, list[int]]:
    """``(tasks, samples, pass@k's ks)`` from --episodes, --tasks, -n and --pass-k."""
    samples = args.samples
    if samples < 1:
        raise ConfigError("--samples", samples, "must be >= 1", "use e.g. -n 4")
    tasks = args.tasks
    if tasks is None:
        episodes = 128 if args.episodes is None else args.episodes
        if episodes < 1 or episodes % samples:
            raise ConfigError(
                "--episodes", episodes, f"must be a positive multiple of -n {samples}",
                f"pass --tasks T for T x {samples} episodes",
            )  # fmt: skip
        tasks = episodes // samples
    elif tasks < 1 or (args.episodes is not None and args.episodes != tasks * samples):
        raise ConfigError(
            "--tasks", tasks, f"must be >= 1 and agree with --episodes (tasks x {samples})",
            "pass --tasks or --episodes, not both",
        )  # fmt: skip
    try:
        ks = sorted({int(k) for k in args.pass_k.split(",")}) if args.pass_k else [1, samples]
    except ValueError:
        raise ConfigError("--pass-k", args.pass_k, "is not a list of ints", "use 1,5") from None
    if not all(1 <= k <= samples for k in ks):
        raise ConfigError(
            "--pass-k", args.pass_k, f"needs 1 <= k <= -n ({samples})", f"raise -n to {max(ks)}"
        )
    return tasks, samples, ks


def _policy_settings(args: argparse.Namespace, served: bool) -> tuple[int | None, bool, dict]:
    """``(history window, action choices, env arguments)``: the flags, else the run that
    trained an in-process ``--model``."""
    trained = {} if served else _trained_run(args.model)
    given = trained.get("history_turns") if args.history_turns is None else args.history_turns
    choices = args.action_choices
    if choices is None:
        choices = bool(trained.get("action_choices", False))
    env_kwargs = {**_trained_env_kwargs(trained, args.env), **parse_kwargs(args.env_kwargs)}
    return history_window(given), choices, env_kwargs


def _env_id(args: argparse.Namespace, served: bool) -> str:
    """The env to evaluate: --env, else the env of the run that trained an in-process
    ``--model`` (its env arguments follow in ``_policy_settings``), else the default."""
    if args.env is not None:
        return str(args.env)
    trained = {} if served else _trained_run(args.model)
    return str(trained.get("env") or DEFAULT_ENV)


def _imports(args: argparse.Namespace, served: bool) -> list[str]:
    """The modules to import first: the run's that trained an in-process ``--model`` (they
    register its env), then --import's."""
    trained = {} if served else _trained_run(args.model)
    return [*trained.get("imports", ()), *args.imports]


def _scaffold(args: argparse.Namespace, served: bool) -> str:
    """The scaffold's name: the flag, else the run that trained an in-process ``--model``."""
    if args.scaffold is not None:
        return str(args.scaffold)
    trained = {} if served else _trained_run(args.model)
    return str(trained.get("scaffold", "default"))


async def _use_chat(spec: Any, engine: Any) -> bool:
    """Whether a served model is asked through the chat API (see ``EngineSpec.api``)."""
    from agentgym.recipes.engines import token_level

    if spec.kind != "openai" or spec.api == "completions":
        if getattr(engine, "tokenizer", None) is None:
            raise ConfigError(
                "tokenizer", spec.tokenizer or spec.model, "was not found: token ids need it",
                "pass --tokenizer DIR (the served model's), or --engine openai --api chat",
            )  # fmt: skip
        return False
    if spec.api == "chat" or getattr(engine, "tokenizer", None) is None:
        return True
    return not await token_level(engine)


def _eval_report(args: argparse.Namespace, spec: Any, run: Any, ks: list[int], **more: Any) -> str:
    """The summary: a JSON object with --json, else a header and a table."""
    if args.json:
        report = {"env": args.env, "model": args.model, "engine": spec.to_dict(), **more}
        return json.dumps({**report, **run.to_dict(ks)}, indent=2)
    where = f" at {spec.url}" if spec.url else ""
    name = args.model or "the tiny policy"
    engine = f"{name} ({spec.kind}{where}, {run.api}, {more['max_tokens']} tokens/turn)"
    head, *rest = run.table(ks).splitlines()
    return "\n".join([f"{args.env}: {head}", f"  {'model':<16}{engine}", *rest])


def _single_agent(env_id: str) -> None:
    from agentgym.registry.multiagent import is_multiagent

    if is_multiagent(env_id):
        raise ConfigError(
            "env",
            env_id,
            "is a multi-agent env; agentgym eval plays single-agent envs",
            "evaluate it with agentgym train's evaluations (--eval-episodes) or "
            "agentgym.multiagent.rollout.play_games (docs/multiagent.md)",
        )


def run_eval(args: argparse.Namespace) -> int:
    """Evaluate; 0, or 2 for bad flags, 1 when the server failed or no episode could be
    judged (the summary is printed first, with the causes)."""
    from agentgym.core.aio import run_sync
    from agentgym.recipes.engines import engine_spec, make_engine
    from agentgym.recipes.evaluation import evaluate_samples, turn_tokens, write_jsonl, write_trace
    from agentgym.registry.lookup import check_env_kwargs, find_env
    from agentgym.rollout.scaffold import make_scaffold
    from agentgym.rollout.traces.writer import parse_mode

    try:
        spec = engine_spec(args)
        args.env = find_env(_env_id(args, spec.served), _imports(args, spec.served))
        _single_agent(args.env)
        tasks, samples, ks = _counts(args)
        parse_mode(args.trace)  # a bad --trace fails before the model loads
        history, choices, env_kwargs = _policy_settings(args, spec.served)
        check_env_kwargs(args.env, env_kwargs)  # before the model loads
        scaffold = _scaffold(args, spec.served)
        max_tokens = turn_tokens(args.env) if args.max_tokens is None else args.max_tokens
        engine = make_engine(spec, seed=args.seed)
        try:
            chat = run_sync(_use_chat(spec, engine))
            run = evaluate_samples(
                engine, args.env, tasks=tasks, samples=samples, seed=args.seed,
                temperature=args.temperature, max_tokens=max_tokens,
                concurrency=args.concurrency, env_kwargs=env_kwargs,
                tokenizer=getattr(engine, "tokenizer", None), chat=chat,
                history_turns=history, action_choices=choices,
                scaffold=None if scaffold == "default" else make_scaffold(scaffold, history),
            )  # fmt: skip
        finally:
            run_sync(engine.close())
    except (ConfigError, RegistryError) as error:
        print(f"agentgym eval: error: {error}", file=sys.stderr)
        return 2
    except InfraError as error:  # the server is down, or failed a request
        print(f"agentgym eval: error: {error}", file=sys.stderr)
        return 1
    if args.output:
        write_jsonl(run.records(), args.output)
        write_trace(run.episodes, args.output, args.trace, getattr(engine, "tokenizer", None))
    settings: dict[str, Any] = {"history_turns": history, "action_choices": choices}
    settings |= {"env_kwargs": env_kwargs, "scaffold": scaffold}
    settings |= {"max_tokens": max_tokens, "temperature": args.temperature, "seed": args.seed}
    print(_eval_report(args, spec, run, ks, **settings))
    unjudged = run.result.unjudged()
    if unjudged is not None:  # a success rate of 0/0 is no result
        print(f"agentgym eval: error: {unjudged}", file=sys.stderr)
        return 1
    return 0
