"""``agentgym serve-env`` in a separate process, played by openenv-core's client and Remote-v0.

One server of ``agentgym/Math-v0`` (32 sessions) serves the module. Checked: OpenEnv's own client
plays an episode; Remote-v0's observations, rewards and infos equal the in-process env's for the
same seeds; 32 sessions at once, and a 33rd refused with the fix named; a client process killed
with SIGKILL gives its session back; a server that is down, drops the connection or misses the
step deadline gives that episode ``infra_error``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import pytest
from openenv.core import GenericEnvClient
from websockets.asyncio.server import ServerConnection, serve

import agentgym
from agentgym.cli import main
from agentgym.envs.remote import LocalServer, RemoteEnv, start_server

pytestmark = pytest.mark.slow  # the server's start: 5 s on an idle machine, 15 s on a busy one

ENV_ID = "agentgym/Math-v0"
SESSIONS = 32


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    served = start_server(ENV_ID, num_envs=SESSIONS)
    yield served
    served.close()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"not true after {timeout} s: {what}")
        time.sleep(0.05)


def in_process(seed: int, answer: str | None = None) -> tuple[Any, Any]:
    """``reset(seed)`` and the step answering ``answer`` (default: the reference) in-process."""
    env = gym.make(ENV_ID)
    try:
        reset = env.reset(seed=seed)
        if answer is None:
            probe = env.step("\\boxed{0}")
            answer = f"\\boxed{{{probe[4]['reference']}}}"
            reset = env.reset(seed=seed)
        return reset, env.step(answer)
    finally:
        env.close()


def test_openenv_client_plays_an_episode(server: LocalServer) -> None:
    (messages, _), step = in_process(3)
    answer = f"\\boxed{{{step[4]['reference']}}}"

    async def play() -> tuple[Any, Any, Any]:
        async with GenericEnvClient(base_url=server.url) as client:
            first = await client.reset(seed=3)
            last = await client.step({"message": answer})
            return first, last, await client.state()

    first, last, state = asyncio.run(play())
    assert first.observation["messages"] == list(messages)
    assert first.observation["info"]["tools"] == []
    assert (first.done, last.done, last.reward) == (False, True, 1.0)
    assert last.observation["info"]["success"] is True
    assert state["env_id"] == ENV_ID
    assert state["step_count"] == 1


def test_remote_equals_in_process(server: LocalServer) -> None:
    env = gym.make("agentgym/Remote-v0", url=server.url, env_id=ENV_ID)
    try:
        for seed, answer in ((0, None), (1, "\\boxed{7}"), (2, None), (3, "no box")):
            reset, step = in_process(seed, answer)
            assert env.reset(seed=seed) == reset
            action = answer or f"\\boxed{{{step[4]['reference']}}}"
            assert env.step(action) == step
        with pytest.raises(agentgym.error.EnvStateError):
            env.step("again")  # the episode ended
    finally:
        env.close()


def test_32_sessions_at_once_and_a_33rd_refused(server: LocalServer) -> None:
    envs = [RemoteEnv(url=server.url) for _ in range(SESSIONS + 1)]
    expected = [in_process(seed, "\\boxed{1}") for seed in range(SESSIONS)]

    async def play() -> tuple[list[Any], int, Any]:
        resets = await asyncio.gather(*(e.areset(seed=i) for i, e in enumerate(envs[:SESSIONS])))
        active = (await asyncio.to_thread(server.status))["active_sessions"]
        refused = await envs[-1].areset(seed=0)  # all 32 sessions are held now
        steps = await asyncio.gather(*(e.astep("\\boxed{1}") for e in envs[:SESSIONS]))
        for env in envs:
            await env.aclose()
        return list(zip(resets, steps, strict=True)), active, refused

    played, active, refused = asyncio.run(play())
    assert played == expected
    assert active == SESSIONS
    obs, info = refused
    assert obs == ()
    assert info["infra_error"] is True
    assert "refused a session" in info["error"]
    assert "--num-envs" in info["error"]
    wait_for(lambda: server.status()["active_sessions"] == 0, "every session closed")


CLIENT = """
import sys, time, gymnasium as gym, agentgym
env = gym.make("agentgym/Remote-v0", url=sys.argv[1], env_id=sys.argv[2])
env.reset(seed=0)
print("holding a session", flush=True)
time.sleep(600)
"""


def test_a_killed_client_gives_its_session_back(server: LocalServer) -> None:
    before = server.status()["active_sessions"]
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, server.url, ENV_ID], stdout=subprocess.PIPE, text=True
    )
    try:
        assert client.stdout is not None
        assert client.stdout.readline().startswith("holding")
        assert server.status()["active_sessions"] == before + 1
        client.send_signal(signal.SIGKILL)
        client.wait()
        wait_for(lambda: server.status()["active_sessions"] == before, "the session freed")
    finally:
        client.kill()
        client.wait()


def test_status_names_the_env_and_capacity(server: LocalServer) -> None:
    status = server.status()
    assert status["env_id"] == ENV_ID
    assert status["max_sessions"] == SESSIONS


# --- failures outside the model: no agentgym server needed --------------------------------------


def test_no_server_is_an_infra_error_not_a_crash() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = RemoteEnv(url=f"http://127.0.0.1:{port}", connect_timeout=5)
    obs, info = env.reset(seed=0)
    assert obs == ()
    assert info["infra_error"] is True
    assert info["tools"] == []
    assert "Connect" in info["error"] or "refused" in info["error"]
    obs, reward, terminated, truncated, info = env.step("hello")
    assert (obs, reward, terminated, truncated) == ((), 0.0, False, True)
    assert info["truncation_reason"] == "infra_error"
    env.close()


def fake_server(on_step: str) -> Callable[[ServerConnection], Any]:
    """A WebSocket server speaking OpenEnv's reset and then failing the step: ``"drop"`` closes
    the connection, ``"hang"`` never answers."""

    async def handler(ws: ServerConnection) -> None:
        async for raw in ws:
            message = json.loads(raw)
            if message["type"] == "reset":
                obs = {"messages": [{"role": "user", "content": "hi"}], "info": {"tools": []}}
                data = {"observation": obs, "reward": None, "done": False}
                await ws.send(json.dumps({"type": "observation", "data": data}))
            elif on_step == "drop":
                await ws.close()
            else:  # never answers; returns once the client hangs up
                await ws.wait_closed()

    return handler


@pytest.mark.parametrize(("on_step", "error"), [("drop", "Connection"), ("hang", "Deadline")])
def test_a_server_failing_mid_episode_is_an_infra_error(on_step: str, error: str) -> None:
    async def play() -> tuple[Any, Any]:
        async with serve(fake_server(on_step), "127.0.0.1", 0) as ws_server:
            port = next(iter(ws_server.sockets)).getsockname()[1]
            env = RemoteEnv(url=f"ws://127.0.0.1:{port}", step_timeout=1.0)
            reset = await env.areset(seed=0)
            step = await env.astep("hello")
            await env.aclose()
            return reset, step

    reset, (obs, reward, terminated, truncated, info) = asyncio.run(play())
    assert reset == (({"role": "user", "content": "hi"},), {"tools": []})
    assert (obs, reward, terminated, truncated) == ((), 0.0, False, True)
    assert info["infra_error"] is True
    assert error in info["error"], info


def test_serve_env_refuses_an_unknown_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-env", "agentgym/Math-v9", "--port", "0"]) == 2
    assert "Did you mean 'agentgym/Math-v0'" in capsys.readouterr().err
