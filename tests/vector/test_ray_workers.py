"""``workers="ray"``: sub-envs in Ray actors on a simulated 2-node cluster.

One ``ray.cluster_utils.Cluster`` (a head and a second node, each declaring 4 CPUs) serves the
whole module: it is slow to start. Code-v0 and SWE-v0 (local backend; the docker backend too
where Docker runs) play the same episodes as in-process for the same seeds; actors land on both
nodes; an actor killed mid-step gives its envs, and only them, ``infra_error`` and is replaced at
the next reset; after close no actor (and no container) is left.

Code-v0 and SWE-v0's local backend need bubblewrap, the docker backend a Docker daemon and
agentgym's image: missing, they skip, or fail with ``AGENTGYM_REQUIRE_DOCKER=1`` (CI).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import agentgym
from agentgym.core import AgentEnv, user
from agentgym.core.env import StepResult
from agentgym.core.types import Action, Observation
from agentgym.error import ConfigError
from agentgym.registry import _ENVS
from agentgym.sandbox import bwrap_usable
from agentgym.vector import AgentVectorEnv

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.slow
REQUIRED = os.environ.get("AGENTGYM_REQUIRE_DOCKER") == "1"
CODE_ANSWER = "```python\ndef f(x):\n    return x\nprint(1)\n```"


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (AGENTGYM_REQUIRE_DOCKER=1 requires it)")
    pytest.skip(reason)


class MarkEnv(AgentEnv):
    """Steps write ``<folder>/<seed>`` and then sleep ``seconds`` (only the env reset with
    ``slow_seed``, when given): a test sees a step in flight."""

    def __init__(
        self, folder: str = "", seconds: float = 0.0, slow_seed: int | None = None
    ) -> None:
        super().__init__()
        self.folder, self.seconds, self.seed = folder, seconds, 0
        self.slow_seed = slow_seed  # only this seed's steps sleep, when given

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        self.seed = int(seed or 0)
        return (user(f"task {self.seed}"),), {"task": self.seed}

    async def astep(self, action: Action) -> StepResult:
        if self.folder:
            Path(self.folder, str(self.seed)).touch()
        if self.slow_seed is None or self.slow_seed == self.seed:
            await asyncio.sleep(self.seconds)
        return (user("done"),), float(self.seed), True, False, {"task": self.seed}


MARK_ID = "agentgym/TestRayMark-v0"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head and one more node, 4 CPUs each, no dashboard; Ray connected to it."""
    if ray.is_initialized():
        ray.shutdown()
    head = {"num_cpus": 4, "object_store_memory": 80 * 2**20, "include_dashboard": False}
    made = cluster_utils.Cluster(initialize_head=True, head_node_args=head)
    made.add_node(num_cpus=4, object_store_memory=80 * 2**20)
    # The actors import MarkEnv by its module's name: put the folder it is found from on their
    # path (this module's package root, as pytest imported it).
    root = Path(__file__).parents[len(__name__.split(".")) - 1]
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    ray.init(
        address=made.address,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    made.wait_for_nodes()
    agentgym.register(MARK_ID, f"{__name__}:MarkEnv", family="Test")
    try:
        yield made
    finally:
        gym.registry.pop(MARK_ID, None)
        _ENVS.pop(MARK_ID, None)
        ray.shutdown()
        made.shutdown()


def _alive_actors() -> list[str]:
    states = ray._private.state.actors().values()  # the GCS's table (no dashboard needed)
    return [a["ActorID"] for a in states if a["State"] != "DEAD"]


def _wait(check: Any, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return bool(check())


def _play(venv: AgentVectorEnv, seed: int, actions: list[list[Any]]) -> list[Any]:
    """Reset with ``seed`` and step each batch of ``actions``; every result, infos included."""
    out: list[Any] = [venv.reset(seed=seed)]
    out += [venv.step(batch) for batch in actions]
    return out


def _plain(value: Any, drop: tuple[str, ...]) -> Any:
    """``value`` with arrays as lists and without the info keys in ``drop`` (those that differ
    between runs: durations, container ids), so that ``==`` compares everything else."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v, drop) for k, v in value.items() if k.lstrip("_") not in drop}
    if isinstance(value, list | tuple):
        return [_plain(v, drop) for v in value]
    return value


def _same_as_in_process(env_id: str, num_envs: int, actions: list[list[Any]], **kwargs: Any) -> Any:
    local = gym.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point", **kwargs)
    try:
        expected = _play(local, 7, actions)
    finally:
        local.close()
    remote = gym.make_vec(
        env_id, num_envs, vectorization_mode="vector_entry_point", workers="ray", **kwargs
    )
    try:
        got = _play(remote, 7, actions)
        nodes = set(remote.envs[0].pool.node_ids())
    finally:
        remote.close()
    return expected, got, nodes


def test_code_episodes_equal_in_process_and_spread_over_both_nodes(cluster: Any) -> None:
    if not bwrap_usable():
        _unavailable("bubblewrap (bwrap) cannot create sandboxes here")
    expected, got, nodes = _same_as_in_process("agentgym/Code-v0", 4, [[CODE_ANSWER] * 4])
    assert _plain(got, ("duration",)) == _plain(expected, ("duration",))
    assert got[1][1].tolist() == [0.0] * 4
    assert got[1][2].all()
    assert len(nodes) == 2  # num_cpus=1 per env, one env per actor, SPREAD: both nodes
    assert _wait(lambda: not _alive_actors(), 30), _alive_actors()


def _swe_actions() -> list[list[Any]]:
    from agentgym.envs.swe.patches import as_action

    ls = as_action([{"name": "bash", "arguments": {"command": "ls"}}])
    submit = as_action([{"name": "submit", "arguments": {}}])
    return [[ls] * 2, [submit] * 2]


SWE_VOLATILE = ("duration", "test_output", "container")


def test_swe_local_episodes_equal_in_process(cluster: Any) -> None:
    if not bwrap_usable():
        _unavailable("bubblewrap (bwrap) cannot create sandboxes here")
    expected, got, _ = _same_as_in_process("agentgym/SWE-v0", 2, _swe_actions(), sandbox="local")
    assert _plain(got, SWE_VOLATILE) == _plain(expected, SWE_VOLATILE)
    assert got[2][2].all()  # submitted: graded and terminated
    assert _wait(lambda: not _alive_actors(), 30), _alive_actors()


def _docker_containers(labels: dict[str, str]) -> list[Any]:
    import docker

    filters = [f"{k}={v}" for k, v in labels.items()]
    return list(docker.from_env().api.containers(all=True, filters={"label": filters}))


def test_swe_docker_episodes_equal_in_process_and_leave_no_container(cluster: Any) -> None:
    from agentgym.core import run_sync
    from agentgym.error import SandboxUnavailable
    from agentgym.sandbox import DockerPool

    pool = DockerPool(size=0)
    try:
        run_sync(pool.start())
    except SandboxUnavailable as error:
        _unavailable(f"docker sandbox unavailable: {error}")
    finally:
        run_sync(pool.close())
    labels = {"agentgym.test": uuid.uuid4().hex[:12]}
    kwargs = {"sandbox": "docker", "backend_options": {"labels": labels}}
    expected, got, _ = _same_as_in_process("agentgym/SWE-v0", 2, _swe_actions(), **kwargs)
    assert _plain(got, SWE_VOLATILE) == _plain(expected, SWE_VOLATILE)
    assert _wait(lambda: not _docker_containers(labels), 30), "containers outlived close"
    assert _wait(lambda: not _alive_actors(), 30), _alive_actors()


def test_killed_actor_fails_only_its_envs_and_is_replaced(cluster: Any, tmp_path: Path) -> None:
    venv = AgentVectorEnv.from_id(
        MARK_ID, 4, workers="ray", envs_per_actor=2, folder=str(tmp_path), seconds=3.0
    )
    try:
        venv.reset(seed=[0, 1, 2, 3])
        pool = venv.envs[0].pool
        first = list(pool.actors)

        async def step_and_kill() -> list[Any]:
            task = asyncio.ensure_future(venv.astep(["go"] * 4))
            marks = [tmp_path / str(s) for s in range(4)]
            while not all(m.exists() for m in marks):  # every step is running in its actor
                await asyncio.sleep(0.05)
            ray.kill(first[0])  # the actor of envs 0 and 1
            return await task  # type: ignore[no-any-return]

        _, rewards, _, truncations, infos = asyncio.run(step_and_kill())
        assert infos["infra_error"].tolist() == [True, True, False, False]
        assert truncations.tolist() == [True, True, False, False]
        assert rewards.tolist() == [0.0, 0.0, 2.0, 3.0]
        assert first[1] in pool.actors  # the other actor lives on

        obs, infos = venv.reset(seed=[10, 11, 12, 13])
        assert [o[0]["content"] for o in obs] == ["task 10", "task 11", "task 12", "task 13"]
        assert "infra_error" not in infos or not infos["infra_error"].any()
        assert pool.actors[0] is not None
        assert pool.actors[0] is not first[0]
    finally:
        venv.close()
    assert _wait(lambda: not _alive_actors(), 30), _alive_actors()


def test_step_past_its_deadline_fails_that_env_only(cluster: Any) -> None:
    venv = AgentVectorEnv.from_id(
        MARK_ID, 4, workers="ray", envs_per_actor=4, step_timeout=2.0, seconds=60.0, slow_seed=0
    )
    try:
        venv.reset(seed=[0, 1, 2, 3])

        async def ragged() -> list[Any]:
            for i in range(4):
                venv.submit_step(i, "go")
            return [t async for t in venv.transitions()]

        got = asyncio.run(ragged())
        # The three quick envs of the same actor answer first: the slow one holds none back.
        assert sorted(t.index for t in got[:3]) == [1, 2, 3]
        assert [t.index for t in got if t.infra_error] == [0]
        assert "deadline" in next(t for t in got if t.infra_error).info["error"]
        obs, _ = venv.reset(seed=[4, 1, 2, 3])  # env 0 is remade in its actor
        assert obs[0][0]["content"] == "task 4"
        actors = [a for a in venv.envs[0].pool.actors if a is not None]
        assert len(actors) == 1  # the actor itself was not replaced
    finally:
        venv.close()


def test_ragged_and_groups_through_ray(cluster: Any) -> None:
    venv = AgentVectorEnv.from_id(MARK_ID, 4, workers="ray", group_size=2)
    try:
        _obs, infos = venv.reset(seed=5)
        assert infos["task"].tolist() == [5, 5, 6, 6]  # group k plays seed + k

        async def ragged() -> list[int]:
            for i in range(4):
                venv.submit_step(i, "go")
            return sorted([t.index async for t in venv.transitions()])

        assert asyncio.run(ragged()) == [0, 1, 2, 3]
    finally:
        venv.close()


def test_the_ray_transport_keeps_the_contract(cluster: Any) -> None:
    from agentgym.vector.transports.ray import RayPool, RayTransport

    from .transports.contract import check_transport

    pool = RayPool(MARK_ID, {}, 1)
    transport = RayTransport(pool, 0)
    # MarkEnv does not refuse a step before reset: no env error to check.
    asyncio.run(check_transport(transport, "go", env_raises=False))
    assert pool.actors == [None]  # closing the pool's only env killed its actor
    assert _wait(lambda: not _alive_actors(), 30), _alive_actors()


def test_unknown_workers_and_ray_options_without_ray_are_refused() -> None:
    with pytest.raises(ConfigError, match="workers='ray'"):
        AgentVectorEnv.from_id("agentgym/FrozenLake-v0", 2, envs_per_actor=2)
    with pytest.raises(ConfigError, match="not a place envs run"):
        AgentVectorEnv.from_id("agentgym/FrozenLake-v0", 2, workers="cluster")


def test_importing_agentgym_and_vector_envs_does_not_import_ray() -> None:
    code = (
        "import sys, gymnasium as gym, agentgym\n"
        "v = gym.make_vec('agentgym/FrozenLake-v0', 2, vectorization_mode='vector_entry_point')\n"
        "v.reset(seed=0); v.close()\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_resources_and_envs_per_actor_come_from_the_registration() -> None:
    from agentgym.vector.transports.ray import LIGHT_ENVS_PER_ACTOR, env_resources

    assert env_resources("agentgym/SWE-v0") == ({"num_cpus": 1}, 1)
    assert env_resources("agentgym/Code-v0") == ({"num_cpus": 1}, 1)
    assert env_resources("agentgym/FrozenLake-v0") == ({}, LIGHT_ENVS_PER_ACTOR)
    agentgym.register(
        "agentgym/TestRayHeavy-v0", MarkEnv, resources={"memory": 2**30}, envs_per_actor=4
    )
    try:
        assert env_resources("agentgym/TestRayHeavy-v0") == ({"memory": 2**30}, 4)
    finally:
        gym.registry.pop("agentgym/TestRayHeavy-v0", None)
        _ENVS.pop("agentgym/TestRayHeavy-v0", None)
