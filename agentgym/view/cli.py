"""``agentgym view PATH``: the run's episodes in a browser, served on 127.0.0.1."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_view_arguments", "run_view"]


def add_view_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        help="a run folder (agentgym train --out), its traces/ folder, an agentgym eval --output "
        "file, or one trace .parquet file",
    )
    parser.add_argument(
        "--compare", metavar="PATH", help="a second run whose curves are drawn beside the first"
    )
    parser.add_argument("--port", type=int, default=8765, help="the port (0: any free one)")


def run_view(args: argparse.Namespace) -> int:
    """Check the trace, then serve the viewer until Ctrl-C."""
    import uvicorn  # here, so that --help needs neither uvicorn nor pyarrow

    from agentgym.view.app import make_app
    from agentgym.view.data import RunData, TraceFileError

    if not 0 <= args.port <= 65535:
        print(f"agentgym view: error: --port {args.port} is not a port (0 to 65535)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        runs = [RunData(p) for p in [args.path, *([args.compare] if args.compare else [])]]
        for run in runs:
            run.table()  # every file checked now, so that the command says what is wrong
    except TraceFileError as e:
        print(f"agentgym view: error: {e}", file=sys.stderr)
        return 2
    # 127.0.0.1 only: a trace holds prompts and model output; reach it remotely over ssh -L
    config = uvicorn.Config(make_app(runs), host="127.0.0.1", port=args.port, log_level="warning")
    server = uvicorn.Server(config)
    print(f"agentgym view: serving {args.path} (Ctrl-C stops)", flush=True)
    original = server.startup

    async def startup(sockets=None):  # type: ignore[no-untyped-def]
        await original(sockets)
        for s in server.servers:
            for sock in s.sockets:
                host, port = sock.getsockname()[:2]
                print(f"agentgym view: open http://{host}:{port}/", flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run()
    return 0
