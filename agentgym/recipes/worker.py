"""One data-parallel worker of ``agentgym train``: ``python -m agentgym.recipes.worker`` with
``agentgym train``'s flags, as ``agentgym train --nproc`` (``agentgym.recipes.launch``) or
DeepSpeed's launcher starts it on every rank (a launcher's ``--local_rank`` is ignored). Rank 0
prints the run's summary; the others print nothing of their own."""

from __future__ import annotations

import argparse
import json
import os
import sys

from agentgym.core.errors import ConfigError

__all__ = ["worker_main"]


def worker_main(argv: list[str]) -> int:
    """Train as ``argv`` (``agentgym train``'s flags) say on the deepspeed backend; returns the
    exit status."""
    from agentgym.recipes.cli import add_train_arguments, run_from_args
    from agentgym.recipes.run import train_run

    parser = argparse.ArgumentParser(prog="python -m agentgym.recipes.worker")
    add_train_arguments(parser)
    parser.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        run = run_from_args(args)
        if run.backend != "deepspeed":
            raise ConfigError(
                "backend", run.backend, "is not deepspeed", "pass --backend deepspeed"
            )
        summary = train_run(run)
    except ConfigError as error:
        print(f"agentgym train: error: {error}", file=sys.stderr)
        return 2
    if summary:
        print(json.dumps(summary, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    code = worker_main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Interpreter teardown with gloo's threads still around aborts now and then ("terminate
    # called without an active exception"); everything is written, so leave at once.
    os._exit(code)
