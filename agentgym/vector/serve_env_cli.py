"""The ``agentgym serve-env`` command: its arguments, and serving with uvicorn.

``agentgym.cli`` declares the subcommand with ``add_serve_env_arguments`` and runs it with
``run_serve_env``; ``serve`` is the same from Python. What is served: ``agentgym.vector.serve_env``.
"""

from __future__ import annotations

import argparse
import socket
import sys

from agentgym.core.deprecation import warn_deprecated
from agentgym.core.errors import ConfigError, Error
from agentgym.core.keyvalue import parse_kwargs
from agentgym.registry.lookup import add_env_arguments, prepare_env
from agentgym.vector.protocol import READY_PREFIX, STATUS_PATH
from agentgym.vector.serve_env import ServeOptions, build_app, close_sessions, make_env

__all__ = ["add_serve_env_arguments", "run_serve_env", "serve"]


def _seconds_or_none(text: str) -> float | None:
    return None if text.lower() in ("none", "0") else float(text)


def add_serve_env_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", metavar="ID|MODULE:ID", help="the env to serve, e.g. agentgym/Math-v0"
    )
    parser.add_argument("env_id", nargs="?", help=argparse.SUPPRESS)  # the old spelling of --env
    parser.add_argument("--num-envs", type=int, default=1, help="most concurrent sessions")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port (0: a free one, printed)")
    add_env_arguments(parser)
    for name, default, what in (
        ("reset-timeout", 120.0, "seconds one reset may take"),
        ("step-timeout", 300.0, "seconds one step may take"),
        ("idle-timeout", 900.0, "seconds a session may go without a call before it is closed"),
    ):
        parser.add_argument(
            f"--{name}", type=_seconds_or_none, default=default, metavar="SECONDS",
            help=f"{what} (none: no limit; default {default:g})",
        )  # fmt: skip
    parser.add_argument(
        "--workers", choices=("thread", "process"), default=None,
        help="where each session's env runs (default: where the env class asks)",
    )  # fmt: skip
    parser.add_argument("--log-level", default="warning", help="uvicorn's log level")


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def serve(options: ServeOptions, host: str, port: int, log_level: str = "warning") -> None:
    """Serve until SIGINT/SIGTERM; prints ``READY_PREFIX ... URL`` once listening."""
    import uvicorn

    make_env(options).close()  # a bad id, kwargs or missing extra fails here, not per session
    app, server = build_app(options)
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    where = f"[{host}]" if ":" in host else host

    async def announce() -> None:
        print(
            f"{READY_PREFIX} {options.env_id}, at most {options.num_envs} sessions, "
            f"WebSocket at /ws, sessions at {STATUS_PATH}: http://{where}:{bound}",
            flush=True,
        )

    async def shutdown() -> None:
        await close_sessions(server)

    app.router.on_startup.append(announce)
    app.router.on_shutdown.insert(0, shutdown)
    config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])


def _env_id(args: argparse.Namespace) -> str:
    """``--env``, or the id given the old way, as the first argument."""
    if args.env_id is not None:
        if args.env is not None:
            fix = "pass the id once, as --env"
            raise ConfigError("env", args.env_id, f"is given besides --env {args.env}", fix)
        warn_deprecated("agentgym serve-env ENV_ID", "agentgym serve-env --env ENV_ID")
        return str(args.env_id)
    if args.env is None:
        raise ConfigError("--env", None, "is missing", "pass e.g. --env agentgym/Math-v0")
    return str(args.env)


def run_serve_env(args: argparse.Namespace) -> int:
    try:
        env_kwargs = parse_kwargs(args.env_kwargs)
        options = ServeOptions(
            env_id=prepare_env(_env_id(args), env_kwargs, args.imports),
            env_kwargs=env_kwargs,
            num_envs=args.num_envs,
            reset_timeout=args.reset_timeout,
            step_timeout=args.step_timeout,
            idle_timeout=args.idle_timeout,
            workers=args.workers,
        )
        serve(options, args.host, args.port, args.log_level)
    except Error as e:  # a bad id or argument: say it, no traceback
        print(f"agentgym serve-env: error: {e}", file=sys.stderr)
        return 2
    return 0
