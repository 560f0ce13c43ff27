"""Env steps per second through each transport of ``AgentVectorEnv``, in one run.

Transports: ``in-process`` (the default), ``ray-1`` and ``ray-2`` (``workers="ray"`` on a
``ray.cluster_utils.Cluster`` simulation of 1 and 2 nodes, each node declaring ``--node-cpus``
CPUs on this one machine), and ``env-server`` (``agentgym serve-env --env <id>`` in a child process,
driven through ``agentgym/Remote-v0`` with ``session="env"``: one WebSocket per env). Workloads:

- ``io``: ``agentgym/BenchSleep-v0``, an env whose step awaits ``--io-delay`` seconds (50 ms:
  a stand-in for a sandbox, a tool server or a judge) and does nothing else;
- ``code``: ``agentgym/Code-v0`` answering every task with the same wrong program (a bubblewrap
  sandbox run per step, then the episode ends and the env autoresets at the next step).

Each (workload, envs, transport) is driven through the lockstep ``reset``/``step`` for
``--steps`` batches after one warm-up batch, alternately with the same in-process, ``--repeats``
times (io; once for code), and the best time of each is kept: on a shared machine the load
changes over a run, and a ratio of two measurements taken minutes apart says little. Reported:
env steps/s of both, their ratio, and the transport's overhead per env step,
``(t_transport - t_in_process) / (steps * envs)``. With
Ray, light envs go ``--envs-per-actor`` to an actor; Code-v0 (registered with a CPU per env)
runs with the same number per actor and no CPU reservation, or 256 envs would need 256 CPUs.

    python benchmarks/env_transports.py --out env_transports.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
from vector_throughput import IOBoundEnv

import agentgym

SLEEP_ID = "agentgym/BenchSleep-v0"
CODE_ID = "agentgym/Code-v0"
CODE_ANSWER = "```python\ndef f(x):\n    return x\n```"


# The I/O-bound env of vector_throughput.py (Ray actors and the env server import it from here).
SleepEnv = IOBoundEnv


@dataclass
class Row:
    workload: str
    envs: int
    transport: str
    steps_per_s: float
    in_process_steps_per_s: float  # measured beside it (alternating), see the module docstring
    vs_in_process: float
    overhead_ms_per_step: float


def _measure(make: Callable[[], Any], action: Any, envs: int, steps: int) -> float:
    """Seconds for ``steps`` lockstep batches (after a reset and one warm-up batch)."""
    venv = make()
    try:
        venv.reset(seed=0)
        venv.step([action] * envs)
        started = time.perf_counter()
        for _ in range(steps):
            venv.step([action] * envs)
        return time.perf_counter() - started
    finally:
        venv.close()


@contextmanager
def ray_cluster(nodes: int, node_cpus: int) -> Iterator[None]:
    """A simulated cluster of ``nodes`` nodes, Ray connected to it, this folder on the actors'
    path (they import ``env_transports:SleepEnv``)."""
    import ray
    from ray.cluster_utils import Cluster

    memory = 200 * 2**20
    head = {"num_cpus": node_cpus, "object_store_memory": memory, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=node_cpus, object_store_memory=memory)
    here = str(Path(__file__).resolve().parent)
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    ray.init(address=cluster.address, runtime_env={"env_vars": {"PYTHONPATH": path}})
    cluster.wait_for_nodes()
    try:
        yield
    finally:
        ray.shutdown()
        cluster.shutdown()


@contextmanager
def env_server(env_id: str, num_envs: int, kwargs: dict[str, Any]) -> Iterator[str]:
    """``agentgym serve-env --env env_id`` in a child process (with BenchSleep-v0 registered there
    too); yields its URL."""
    import subprocess

    from agentgym.vector.launch import LocalServer, _wait_ready

    here = str(Path(__file__).resolve().parent)
    argv = ["serve-env", "--env", env_id, "--port", "0", "--num-envs", str(num_envs)]
    argv += ["--env-kwargs", *(f"{k}={json.dumps(v)}" for k, v in kwargs.items())]
    code = (
        f"import sys; sys.path.insert(0, {here!r}); import agentgym; "
        f"agentgym.register({SLEEP_ID!r}, 'env_transports:SleepEnv', family='Bench'); "
        f"from agentgym.cli import main; sys.exit(main({argv!r}))"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    server = LocalServer(process, _wait_ready(process, 120.0))
    try:
        yield server.url
    finally:
        server.close()


def _workloads(args: argparse.Namespace) -> list[tuple[str, str, Any, dict[str, Any]]]:
    chosen = []
    if "io" in args.workloads:
        chosen.append(("io", SLEEP_ID, "go", {"delay": args.io_delay}))
    if "code" in args.workloads:
        chosen.append(("code", CODE_ID, CODE_ANSWER, {"timeout": 10}))
    return chosen


def _maker(env_id: str, envs: int, kwargs: dict[str, Any]) -> Callable[[], Any]:
    def make() -> Any:
        return gym.make_vec(env_id, envs, vectorization_mode="vector_entry_point", **kwargs)

    return make


def _run_transport(transport: str, args: argparse.Namespace, rows: list[Row]) -> None:
    """Each workload and size through ``transport`` and in-process, alternately ``--repeats``
    times; the best time of each (the least disturbed by other load on the machine)."""
    for workload, env_id, action, kwargs in _workloads(args):
        options: dict[str, Any] = {"workers": "ray", "envs_per_actor": args.envs_per_actor}
        if workload == "code":
            options["ray_resources"] = {"num_cpus": 0}
        for envs in args.envs:
            local = _maker(env_id, envs, kwargs)
            if transport == "env-server":
                with env_server(env_id, envs, kwargs) as url:
                    remote_kwargs = {"url": url, "session": "env"}
                    remote = _maker("agentgym/Remote-v0", envs, remote_kwargs)
                    _measure_pair(transport, workload, envs, local, remote, action, args, rows)
            else:
                remote = _maker(env_id, envs, {**kwargs, **options})
                _measure_pair(transport, workload, envs, local, remote, action, args, rows)


def _measure_pair(
    transport: str,
    workload: str,
    envs: int,
    local: Callable[[], Any],
    remote: Callable[[], Any],
    action: Any,
    args: argparse.Namespace,
    rows: list[Row],
) -> None:
    steps = args.steps if workload == "io" else args.code_steps
    repeats = args.repeats if workload == "io" else 1
    pairs = [
        (_measure(local, action, envs, steps), _measure(remote, action, envs, steps))
        for _ in range(repeats)
    ]
    base, seconds = min(p[0] for p in pairs), min(p[1] for p in pairs)
    row = Row(
        workload,
        envs,
        transport,
        envs * steps / seconds,
        envs * steps / base,
        base / seconds,
        (seconds - base) / (steps * envs) * 1000,
    )
    rows.append(row)
    print(f"{workload:5s} {envs:4d} envs  {transport:10s} {row.steps_per_s:8.1f} steps/s, "
          f"in-process {row.in_process_steps_per_s:8.1f}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--workloads", nargs="+", default=["io", "code"])
    parser.add_argument("--transports", nargs="+", default=["ray-1", "ray-2", "env-server"])
    parser.add_argument("--steps", type=int, default=20, help="lockstep batches (io)")
    parser.add_argument("--repeats", type=int, default=3, help="alternations per io size")
    parser.add_argument("--code-steps", type=int, default=3, help="lockstep batches (code)")
    parser.add_argument("--io-delay", type=float, default=0.05)
    parser.add_argument("--envs-per-actor", type=int, default=32)
    parser.add_argument("--node-cpus", type=int, default=8, help="CPUs each node declares")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    agentgym.register(SLEEP_ID, "env_transports:SleepEnv", family="Bench")

    rows: list[Row] = []
    for nodes in (1, 2):
        if f"ray-{nodes}" not in args.transports:
            continue
        with ray_cluster(nodes, args.node_cpus):
            _run_transport(f"ray-{nodes}", args, rows)
    if "env-server" in args.transports:
        _run_transport("env-server", args, rows)
    print(f"\n{'workload':8s} {'envs':>5s} {'transport':10s} {'steps/s':>9s} {'in-process':>10s} "
          f"{'ratio':>6s} {'overhead ms/step':>16s}")  # fmt: skip
    for r in rows:
        print(f"{r.workload:8s} {r.envs:5d} {r.transport:10s} {r.steps_per_s:9.1f} "
              f"{r.in_process_steps_per_s:10.1f} {r.vs_in_process:6.2f} "
              f"{r.overhead_ms_per_step:16.3f}")  # fmt: skip
    if args.out is not None:
        machine = {"cpus": os.cpu_count(), "python": platform.python_version()}
        payload = {"args": vars(args) | {"out": str(args.out)}, "machine": machine}
        payload["rows"] = [asdict(r) for r in rows]
        args.out.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    sys.exit(main())
