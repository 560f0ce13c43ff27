"""The ``agentgym`` command.

::

    agentgym list [--family F] [--tag T] [--json]
    agentgym play <env-id> [--seed N] [--task-id ID] [--role R] [--opponent NAME] [--env-kwargs ...]
    agentgym train [--env ID] [--algo grpo|ppo|dapo] [--steps N] [--out DIR] [--resume] ...
    agentgym eval [--env ID] [--engine hf|openai|sglang] [--model DIR|NAME] [-n N] [--json] ...
    agentgym view PATH [--compare PATH] [--port P]
    agentgym serve-env --env ID [--num-envs N] [--host H] [--port P] [--env-kwargs k=v ...]

Every command that makes an env takes it the same way (docs/configuration.md): the id (or
``module:Env-v0``, which imports ``module`` first, as ``gym.make`` does), ``--env-kwargs``
(``KEY=VALUE`` items, the value read as JSON when it parses, or JSON objects; repeatable) and
``--import MODULE`` (repeatable) for modules that register the user's own envs. An unknown id or
argument is refused before anything loads.
    agentgym mcp inspect [--url URL] [--call TOOL] [--arguments JSON] [--json] [-- COMMAND ...]

Each subcommand is one entry in ``COMMANDS``: a function that declares its arguments on an
``argparse`` parser, a function that runs it and returns the exit status, and the extra it needs
(``pip install 'agentgymnasium[train]'``). A new subcommand is a new entry; ``main`` never changes.

``list`` and ``play`` need only the core install. A subcommand's arguments are declared when that
subcommand is parsed (or its help shown), so each imports only what it uses; when its extra is
missing it says which one to install and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import gymnasium as gym

import agentgym
from agentgym.core.deprecation import warn_deprecated
from agentgym.core.info import TASK_ID, TOOLS
from agentgym.core.keyvalue import parse_kwargs
from agentgym.core.multiagent import MultiAgentEnv
from agentgym.error import ConfigError
from agentgym.extras import install_hint, missing_requirements
from agentgym.registry import EnvInfo, env_info, list_envs, plugins
from agentgym.registry.lookup import add_env_arguments, prepare_env
from agentgym.registry.multiagent import MultiAgentInfo, list_multiagent_envs

if TYPE_CHECKING:
    from agentgym.multiagent.play import GamePlayer

__all__ = ["COMMANDS", "Command", "build_parser", "main"]

EXIT_USAGE = 2


@dataclass(frozen=True)
class Command:
    """One subcommand: its one-line help, its arguments, what it does and the extra it needs."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    extra: str | None = None
    """The optional dependencies it needs (``pip install 'agentgymnasium[<extra>]'``); None: the
    core."""


def _error(command: str, message: object) -> int:
    print(f"agentgym {command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _env_extras(env_id: object) -> list[str]:
    """The extras a registered env (single- or multi-agent) declares; [] for anything else."""
    if not isinstance(env_id, str):
        return []
    if env_id in _ids():
        return list(env_info(env_id).extras)
    return next((list(info.extras) for info in list_multiagent_envs() if info.id == env_id), [])


# --- agentgym list ----------------------------------------------------------------------------


def _add_list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", help="only envs of this family, e.g. FrozenLake")
    parser.add_argument("--tag", help="only envs with this tag, e.g. tools")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")


def _env_row(info: EnvInfo | MultiAgentInfo) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": info.id,
        "family": info.family,
        "tags": list(info.tags),
        "extras": list(info.extras),
        # a multi-agent env's rewards are per role: its docstring says
        "reward_range": list(info.reward_range) if isinstance(info, EnvInfo) else None,
        "description": info.description,
    }
    if isinstance(info, MultiAgentInfo):
        row["roles"] = list(info.roles)
    return row


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        padded = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return "\n".join(lines)


def _run_list(args: argparse.Namespace) -> int:
    envs = [_env_row(info) for info in list_envs(family=args.family, tag=args.tag)]
    multi = list_multiagent_envs(family=args.family, tag=args.tag)
    envs = sorted([*envs, *map(_env_row, multi)], key=lambda env: env["id"])
    if args.json:
        print(json.dumps(envs, indent=2))
        return 0
    if not envs:
        print("No registered env matches.")
    else:
        rows = [["ID", "FAMILY", "TAGS", "EXTRAS", "REWARD", "DESCRIPTION"]]
        for env in envs:
            tags, extras = ",".join(env["tags"]) or "-", ",".join(env["extras"]) or "-"
            rows.append([env["id"], env["family"], tags, extras, _reward(env), _about(env)])
        print(_table(rows))
    for status in plugins():
        if not status.ok:
            message = f"plugin {status.name!r} ({status.value}) failed to load: {status.error}"
            print(message, file=sys.stderr)
    return 0


def _reward(env: Mapping[str, Any]) -> str:
    if env["reward_range"] is None:
        return "per role"
    low, high = env["reward_range"]
    return f"[{low:g}, {high:g}]"


def _about(env: Mapping[str, Any]) -> str:
    roles = env.get("roles")
    return f"Roles {', '.join(roles)}. {env['description']}" if roles else env["description"]


# --- agentgym play ----------------------------------------------------------------------------


def _add_play_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id", help="a registered id, e.g. agentgym/FrozenLake-v0")
    parser.add_argument("--seed", type=int, help="seed of the first reset")
    parser.add_argument(
        "--task-id",
        type=_task_id,
        metavar="ID",
        help="play this task in every episode: an id as play shows it (e.g. HumanEval/0), or "
        "an integer (FrozenLake's map number, else an index into the env's tasks)",
    )
    parser.add_argument(
        "--role",
        action="append",
        default=[],
        help="multi-agent envs: a role you play (repeatable; default the first role); the others "
        "are played by the env's scripted players, or by you where a role has none",
    )
    parser.add_argument(
        "--opponent",
        metavar="NAME",
        help="multi-agent envs: the scripted player of the roles you do not play (e.g. TicTacToe's "
        "heuristic; default each role's own)",
    )
    add_env_arguments(parser)
    parser.add_argument(  # the old spelling of --env-kwargs
        "--kw", action="extend", nargs="+", default=[], help=argparse.SUPPRESS
    )


def _task_id(text: str) -> int | str:
    """``--task-id``: an integer when the text is one (``"5"`` -> 5), else the id as written."""
    try:
        return int(text)
    except ValueError:
        return text


def _ids() -> set[str]:
    return {info.id for info in list_envs()}


def _run_play(args: argparse.Namespace) -> int:
    try:
        if args.kw:
            warn_deprecated("agentgym play --kw", "--env-kwargs")
        kwargs = parse_kwargs([*args.kw, *args.env_kwargs])
        env = agentgym.make(prepare_env(args.env_id, kwargs, args.imports), **kwargs)
    except ImportError as e:  # an env whose optional dependencies are not installed
        return _error("play", f"{e}.{install_hint(_env_extras(args.env_id))}")
    except (gym.error.Error, ValueError, TypeError) as e:
        return _error("play", e)
    options = None if args.task_id is None else {TASK_ID: args.task_id}
    try:
        return _player(env, args).run(seed=args.seed, options=options)
    except ConfigError as e:  # e.g. a --task-id the env rejects on reset, an unknown --role
        return _error("play", e)
    except KeyboardInterrupt:
        print(file=sys.stdout)
        return 130
    finally:
        env.close()


def _player(env: Any, args: argparse.Namespace) -> Player | GamePlayer:
    """The terminal player of ``env``: ``Player``, or ``GamePlayer`` for a multi-agent env."""
    if isinstance(env, MultiAgentEnv):
        from agentgym.multiagent.play import GamePlayer, seat

        seats = seat(env, args.role, args.opponent)
        return GamePlayer(env, Terminal(stdin=sys.stdin, stdout=sys.stdout), seats)
    if args.role or args.opponent:
        raise ConfigError(
            "--role" if args.role else "--opponent",
            args.role[0] if args.role else args.opponent,
            f"applies to multi-agent envs only, and {args.env_id} has one player",
            "leave out --role and --opponent",
        )
    return Player(env, stdin=sys.stdin, stdout=sys.stdout)


HELP_LINE = "Type an action: a line, or a ``` fenced block over several lines. :r resets, :q quits."


class Terminal:
    """Messages out, actions in: what a person reads and types in ``agentgym play``."""

    def __init__(self, *, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin, self.stdout = stdin, stdout

    def say(self, text: str = "") -> None:
        print(text, file=self.stdout, flush=True)

    def show(self, messages: Sequence[Mapping[str, Any]]) -> None:
        for message in messages:
            label = message["role"]
            if message.get("name"):
                label += f" {message['name']}"
            self.say(f"[{label}]")
            self.say(str(message.get("content") or ""))

    def read_line(self) -> str | None:
        line = self.stdin.readline()
        return None if line == "" else line.rstrip("\n")

    def read_action(self) -> str | None:
        """One action: a non-empty line, or the lines of a fenced block; ``None`` at EOF."""
        while True:
            print("> ", end="", file=self.stdout, flush=True)
            line = self.read_line()
            if line is None:
                self.say()
                return None
            if line.strip():
                break
        stripped = line.strip()
        if not stripped.startswith("```") or (len(stripped) > 3 and stripped.endswith("```")):
            return line
        lines = [line]
        while True:
            more = self.read_line()
            if more is None:
                return None
            lines.append(more)
            if more.strip().endswith("```"):
                return "\n".join(lines)


class Player(Terminal):
    """A person plays an env in a terminal: messages out, actions in, until ``:q`` or EOF."""

    def __init__(self, env: gym.Env[Any, Any], *, stdin: TextIO, stdout: TextIO) -> None:
        super().__init__(stdin=stdin, stdout=stdout)
        self.env = env
        self.episode_return = 0.0

    def run(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> int:
        self.reset(seed=seed, options=options)
        self.say(HELP_LINE)
        while True:
            action = self.read_action()
            if action is None or action.strip() == ":q":
                return 0
            if action.strip() == ":r":
                self.reset(options=options)
                continue
            if not self.step(action):
                continue
            self.say(f"Episode over. Return: {self.episode_return:g}")
            self.say("Press Enter for a new episode, or :q to quit.")
            answer = self.read_line()
            if answer is None or answer.strip() == ":q":
                return 0
            self.reset(options=options)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        observation, info = self.env.reset(seed=seed, options=options)
        self.episode_return = 0.0
        task = "" if info.get(TASK_ID) is None else f" (task {info[TASK_ID]})"
        self.say(f"=== New episode{task}")
        self.show(observation)
        tools = info.get(TOOLS) or []
        if tools:
            self.say("Tools:")
            for schema in tools:
                self.say(f"  {describe_tool(schema)}")

    def step(self, action: str) -> bool:
        """Step with ``action`` and show the result; whether the episode ended."""
        observation, reward, terminated, truncated, _ = self.env.step(action)
        self.episode_return += float(reward)
        self.show(observation)
        self.say(f"reward={float(reward):g} terminated={terminated} truncated={truncated}")
        return bool(terminated or truncated)


def describe_tool(schema: dict[str, Any]) -> str:
    """``move(direction: "left"|"right"): Move one square.`` from an OpenAI tool schema."""
    function = schema.get("function", schema)
    params = []
    for name, prop in function.get("parameters", {}).get("properties", {}).items():
        if "enum" in prop:
            params.append(f"{name}: {'|'.join(json.dumps(v) for v in prop['enum'])}")
        else:
            params.append(f"{name}: {prop.get('type', 'any')}")
    signature = f"{function['name']}({', '.join(params)})"
    description = function.get("description")
    return f"{signature}: {description}" if description else signature


# --- the command ------------------------------------------------------------------------------
# Each subcommand's module is imported only when that subcommand is parsed: the server needs the
# [serve] extra, train and eval need torch, and `agentgym list` needs none of them.


def _add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    from agentgym.inference.server import add_serve_arguments

    add_serve_arguments(parser)


def _run_serve(args: argparse.Namespace) -> int:
    from agentgym.inference.server import run_serve

    if getattr(args, "gateway", False):
        from agentgym.gateway import gateway_routes

        return run_serve(args, mount=gateway_routes)
    return run_serve(args)


def _add_train_arguments(parser: argparse.ArgumentParser) -> None:
    from agentgym.recipes.cli import add_train_arguments

    add_train_arguments(parser)


def _run_train(args: argparse.Namespace) -> int:
    from agentgym.recipes.cli import run_train

    return run_train(args)


def _add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    from agentgym.recipes.eval_cli import add_eval_arguments

    add_eval_arguments(parser)


def _run_eval(args: argparse.Namespace) -> int:
    from agentgym.recipes.eval_cli import run_eval

    return run_eval(args)


def _add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    from agentgym.envs.mcp.cli import add_mcp_arguments

    add_mcp_arguments(parser)


def _run_mcp(args: argparse.Namespace) -> int:
    from agentgym.envs.mcp.cli import run_mcp

    return run_mcp(args)


def _add_swe_arguments(parser: argparse.ArgumentParser) -> None:
    from agentgym.envs.swe.synth.cli import add_swe_arguments

    add_swe_arguments(parser)


def _run_swe(args: argparse.Namespace) -> int:
    from agentgym.envs.swe.synth.cli import run_swe

    return run_swe(args)


def _add_serve_env_arguments(parser: argparse.ArgumentParser) -> None:
    from agentgym.vector.serve_env_cli import add_serve_env_arguments

    add_serve_env_arguments(parser)


def _run_serve_env(args: argparse.Namespace) -> int:
    from agentgym.vector.serve_env_cli import run_serve_env

    return run_serve_env(args)


def _add_view_arguments(parser: argparse.ArgumentParser) -> None:
    from agentgym.view.cli import add_view_arguments

    add_view_arguments(parser)


def _run_view(args: argparse.Namespace) -> int:
    from agentgym.view.cli import run_view

    return run_view(args)


COMMANDS: dict[str, Command] = {
    "list": Command("list every registered env", _add_list_arguments, _run_list),
    "play": Command("play an env yourself in the terminal", _add_play_arguments, _run_play),
    "serve": Command(
        "serve a model over OpenAI-compatible and SGLang-native HTTP APIs (token ids, tools)",
        _add_serve_arguments,
        _run_serve,
        extra="serve",
    ),
    "serve-env": Command(
        "serve a registered env over OpenEnv's HTTP/WebSocket protocol (agentgym/Remote-v0, TRL)",
        _add_serve_env_arguments,
        _run_serve_env,
        extra="openenv",
    ),
    "train": Command(
        "train a policy on an env with PPO, GRPO or DAPO (run folder, curves, checkpoints)",
        _add_train_arguments,
        _run_train,
        extra="train",
    ),
    "eval": Command(
        "evaluate a local or served model on an env: success (95 percent interval), pass@k",
        _add_eval_arguments,
        _run_eval,
        extra="train",
    ),
    "view": Command(
        "a run's episodes in a browser: curves, updates, tokens, search (a local web app)",
        _add_view_arguments,
        _run_view,
        extra="serve",
    ),
    "mcp": Command(
        "MCP servers: `agentgym mcp inspect -- <server command>` lists tools and tries a call",
        _add_mcp_arguments,
        _run_mcp,
        extra="mcp",
    ),
    "swe": Command(
        "SWE tasks: `agentgym swe synth REPO` makes validated SWE-v0 tasks from a local repo; "
        "`agentgym swe export-sft` writes their gold trajectories as SFT data",
        _add_swe_arguments,
        _run_swe,
    ),
}


class _SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser that declares its arguments when first parsed or asked for help,
    after checking that the subcommand's extra is installed."""

    def __init__(self, *args: Any, command: Command | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._command = command

    def _declare(self) -> None:
        command, self._command = self._command, None
        if command is None:
            return
        extras = [command.extra] if command.extra else []
        missing = missing_requirements(command.extra) if command.extra else []
        if missing:
            needs = f"needs the {command.extra!r} extra ({', '.join(missing)} not installed)."
            self.exit(EXIT_USAGE, f"{self.prog}: error: {needs}{install_hint(extras)}\n")
        try:
            command.add_arguments(self)
        except ImportError as e:  # installed, yet something it imports is not
            self.exit(EXIT_USAGE, f"{self.prog}: error: {e}.{install_hint(extras)}\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._declare()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._declare()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    """The ``agentgym`` parser; each subcommand declares its arguments when it is parsed."""
    summary = (agentgym.__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog="agentgym", description=summary)
    parser.add_argument("--version", action="version", version=f"agentgym {agentgym.__version__}")
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_SubcommandParser
    )
    for name, command in COMMANDS.items():
        subparsers.add_parser(name, help=command.help, description=command.help, command=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``agentgym`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error argparse already reported
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    command = COMMANDS[args.command]
    try:
        return command.run(args)
    except ImportError as e:  # e.g. the env asked for needs an extra that is not installed
        extras = _env_extras(getattr(args, "env", None) or getattr(args, "env_id", None))
        if not extras and command.extra:
            extras = [command.extra]
        return _error(args.command, f"{e}.{install_hint(extras)}")
