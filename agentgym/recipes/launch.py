"""``agentgym train --nproc N``: a run on several data-parallel processes, on one machine or more.

::

    agentgym train --nproc 4 --env agentgym/FrozenLake-v0 --out runs/fl4
    # two machines, 8 processes each; run on each with its own --node-rank
    agentgym train --nproc 8 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --out /shared/fl

The launcher resolves the run as ``agentgym train`` would (recipe, run file, flags), with the
deepspeed backend, writes it to a run file and starts ``torch.distributed.run`` (torchrun) on it:
``--nproc`` worker processes on this node, each running ``python -m agentgym.recipes.worker``.
Each worker trains beside the others; each plays its share of every batch
(``agentgym.rollout.sharded_source``). Rank 0 owns the run folder, the progress display and the
evaluations; the other ranks print nothing of their own. ``--out`` must be a folder every node
sees (a shared file system): rank 0 writes the metrics and every rank its part of each
checkpoint.

The worker module (``agentgym.recipes.worker``) also runs under DeepSpeed's own launcher,
which reads a hostfile and starts the workers on every host over ssh (docs/distributed.md)::

    deepspeed --hostfile hosts --module agentgym.recipes.worker --backend deepspeed --out ...

Each worker gets ``cpu_count / nproc`` OpenMP threads (unless ``OMP_NUM_THREADS`` is set):
processes sharing a machine's cores do not oversubscribe them (on a CPU-only machine they are
the update's threads; torchrun's own default would be 1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.core.jsonsafe import json_safe

__all__ = ["add_launch_arguments", "launch_command", "launch_train", "wants_launch"]

DEFAULT_MASTER_PORT = 29500
"""torchrun's own default rendezvous port."""


def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``agentgym train``'s launch flags (not run settings: they are not recorded)."""
    group = parser.add_argument_group(
        "data-parallel launch",
        "start N processes per node with torchrun (implies --backend deepspeed); see "
        "docs/distributed.md",
    )
    add = group.add_argument
    add("--nproc", type=int, metavar="N", help="processes on this node (e.g. one per GPU)")
    add("--nnodes", type=int, default=1, metavar="M", help="nodes in the run (default 1)")
    add("--node-rank", type=int, default=0, metavar="R", help="this node's rank, 0..M-1")
    add("--master-addr", default="127.0.0.1", metavar="HOST", help="node 0's address")
    add(
        "--master-port",
        type=int,
        default=DEFAULT_MASTER_PORT,
        metavar="PORT",
        help=f"a free port on node 0 (default {DEFAULT_MASTER_PORT})",
    )


def wants_launch(args: argparse.Namespace) -> bool:
    """Whether the flags ask for a launch (``--nproc``, or ``--nnodes`` > 1)."""
    return getattr(args, "nproc", None) is not None or getattr(args, "nnodes", 1) != 1


def _check(args: argparse.Namespace) -> int:
    """The processes per node, after the launch flags are checked."""
    nproc = 1 if args.nproc is None else args.nproc
    if nproc < 1:
        raise ConfigError("--nproc", nproc, "must be >= 1", "pass e.g. --nproc 2")
    if args.nnodes < 1:
        raise ConfigError("--nnodes", args.nnodes, "must be >= 1", "pass e.g. --nnodes 2")
    if not 0 <= args.node_rank < args.nnodes:
        raise ConfigError(
            "--node-rank",
            args.node_rank,
            f"is not in 0..{args.nnodes - 1} (--nnodes {args.nnodes})",
            "give each node its own rank, 0 on the node at --master-addr",
        )
    if args.backend not in (None, "deepspeed"):
        raise ConfigError(
            "--backend",
            args.backend,
            "trains in one process; --nproc / --nnodes launch deepspeed processes",
            "drop --backend (deepspeed is implied), or drop --nproc and --nnodes",
        )
    return nproc


def launch_command(args: argparse.Namespace, run_file: Path) -> list[str]:
    """The torchrun command line that starts this node's workers on ``run_file``."""
    nproc = _check(args)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]
    if args.nnodes == 1 and args.master_port == DEFAULT_MASTER_PORT:
        command.append("--standalone")  # a free port of its own
    else:
        command += ["--nnodes", str(args.nnodes), "--node_rank", str(args.node_rank)]
        command += ["--master_addr", args.master_addr, "--master_port", str(args.master_port)]
    return [*command, "-m", "agentgym.recipes.worker", "--config", str(run_file)]


def _worker_env(nproc: int) -> dict[str, str]:
    env = dict(os.environ)
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // nproc))
    return env


def launch_train(args: argparse.Namespace, resolve: Callable[[argparse.Namespace], Any]) -> int:
    """Resolve the run of ``args`` with ``resolve`` (``agentgym.recipes.cli.run_from_args``;
    deepspeed backend), then run this node's workers on it; returns torchrun's exit status."""
    try:
        nproc = _check(args)
        args.backend = "deepspeed"
        run = resolve(args)
    except ConfigError as error:
        print(f"agentgym train: error: {error}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="agentgym-launch-") as folder:
        run_file = Path(folder) / "run.json"
        run_file.write_text(json.dumps(run.to_dict(), default=json_safe))
        command = launch_command(args, run_file)
        try:
            return subprocess.run(command, env=_worker_env(nproc), check=False).returncode
        except KeyboardInterrupt:  # the workers got the Ctrl-C too and stop after their update
            return 130
