"""``agentgym serve-env`` in a separate process, played by openenv-core's client and Remote-v0.

One server of ``agentgym/Math-v0`` (32 sessions) serves the module. Checked: OpenEnv's own client
plays an episode; Remote-v0's observations, rewards and infos equal the in-process env's for the
same seeds; 32 sessions at once, and a 33rd refused with the fix named; a client process killed
with SIGKILL gives its session back; a server that is down, drops the connection or misses the
step deadline gives that episode ``infra_error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import gymnasium as gym
import pytest
from websockets.asyncio.server import ServerConnection, serve

import agentgym
from agentgym.cli import main
from agentgym.core.env import AgentEnv
from agentgym.core.types import user
from agentgym.vector.remote import LocalServer, RemoteEnv, start_server

pytestmark = pytest.mark.slow  # the server's start: 5 s on an idle machine, 15 s on a busy one

ENV_ID = "agentgym/Math-v0"
SESSIONS = 32


@pytest.fixture(scope="module")
def served() -> Iterator[LocalServer]:
    served = start_server(ENV_ID, num_envs=SESSIONS)
    yield served
    served.close()


@pytest.fixture
def server(served: LocalServer) -> LocalServer:
    """The module's server once the sessions of earlier tests are gone (a closed client's
    session ends when the server has read its close, a moment later)."""
    wait_for(lambda: served.status()["active_sessions"] == 0, "earlier sessions closed")
    return served


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

    from openenv.core import GenericEnvClient  # imports gradio: seconds, so not at collection

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


def test_make_vec_passes_env_id_to_the_remote_envs(server: LocalServer) -> None:
    venv = gym.make_vec(
        "agentgym/Remote-v0",
        num_envs=2,
        vectorization_mode="vector_entry_point",
        url=server.url,
        env_id=ENV_ID,
    )
    try:
        observations, _ = venv.reset(seed=[0, 1])
        assert list(observations) == [in_process(0)[0][0], in_process(1)[0][0]]
    finally:
        venv.close()


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
    before = 0
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
    assert main(["serve-env", "--env", "agentgym/Math-v9", "--port", "0"]) == 2
    assert "Did you mean 'agentgym/Math-v0'" in capsys.readouterr().err


# --- servers in this process: the server's own deadline and idle reaping, a foreign server -----


@contextlib.contextmanager
def served_here(app: Any) -> Iterator[str]:
    """``app`` under uvicorn on a free loopback port, in a thread of this process."""
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, "uvicorn started")
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


class SlowEnv(AgentEnv):
    """Answers ``"slow"`` after an hour (the server's deadline cuts it), anything else at once."""

    closed_envs: ClassVar[list[SlowEnv]] = []

    async def areset(self, *, seed: int | None = None, options: Any = None) -> Any:
        await super().areset(seed=seed, options=options)
        return (user("say something"),), {"tools": []}

    async def astep(self, action: Any) -> Any:
        if action == "slow":
            await asyncio.sleep(3600)
        return (user("ok"),), 1.0, True, False, {}

    async def aclose(self) -> None:
        SlowEnv.closed_envs.append(self)
        await super().aclose()


@pytest.fixture(scope="module")
def slow_env_id() -> Iterator[str]:
    env_id = "remotetest/Slow-v0"  # not agentgym/: the contract test counts those
    gym.register(env_id, entry_point=SlowEnv)
    yield env_id
    del gym.registry[env_id]


def test_the_servers_step_deadline_is_an_infra_error_and_the_next_reset_works(
    slow_env_id: str,
) -> None:
    from agentgym.vector.serve_env import ServeOptions, build_app

    options = ServeOptions(slow_env_id, num_envs=2, step_timeout=0.5, idle_timeout=None)
    with served_here(build_app(options)[0]) as url:
        env = RemoteEnv(url=url, session="env")
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("slow")
        assert (obs, reward, terminated, truncated) == ((), 0.0, False, True)
        assert info["infra_error"] is True
        assert "DeadlineExceeded" in info["error"]
        env.reset(seed=1)  # the server made a fresh env for the session
        assert env.step("fast")[1] == 1.0
        env.close()


def test_an_idle_session_is_closed_with_its_env(slow_env_id: str) -> None:
    from agentgym.vector.serve_env import ServeOptions, build_app

    options = ServeOptions(slow_env_id, step_timeout=0.5, reset_timeout=0.5, idle_timeout=1.0)
    app, server = build_app(options)
    closed_before = len(SlowEnv.closed_envs)
    with served_here(app) as url:
        env = RemoteEnv(url=url, session="env")
        env.reset(seed=0)
        assert server.active_sessions == 1
        # OpenEnv's reaper looks every max(idle_timeout / 4, 5 s).
        wait_for(lambda: server.active_sessions == 0, "the idle session reaped", timeout=30)
        # Its env is closed on the loop it ran on, after the session is gone from the count.
        closed = closed_before + 1
        wait_for(lambda: len(SlowEnv.closed_envs) == closed, "the reaped env closed", timeout=30)
        assert len(SlowEnv.closed_envs) == closed  # closed once
        # The socket stays open; the reaped session answers infra_error, and a new one works.
        _, _, _, truncated, info = env.step("fast")
        assert truncated is True
        assert "closed by the server" in info["error"]
        env.reset(seed=1)
        assert env.step("fast")[1] == 1.0
        env.close()


def echo_app() -> Any:
    """The FastAPI app of an OpenEnv env that is not agentgym's: echoes the message, done after
    two steps (openenv-core imported here: it imports gradio, seconds at every collection)."""
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    class EchoAction(Action):
        message: str

    class EchoObservation(Observation):
        echoed_message: str = ""

    class EchoEnvironment(Environment[EchoAction, EchoObservation, State]):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self.steps = 0

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Any:
            self.steps = 0
            return EchoObservation(echoed_message="ready")

        def step(self, action: EchoAction, timeout_s: float | None = None, **kw: Any) -> Any:
            self.steps += 1
            return EchoObservation(echoed_message=action.message, reward=0.5, done=self.steps == 2)

        @property
        def state(self) -> State:
            return State(step_count=self.steps)

    return create_fastapi_app(EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=2)


def test_remote_plays_any_openenv_server() -> None:
    with served_here(echo_app()) as url:
        env = gym.make("agentgym/Remote-v0", url=url, env_id="anything")  # no /status to check
        info = {"observation": {"echoed_message": "ready"}, "tools": []}
        assert env.reset(seed=0) == (({"role": "user", "content": "ready"},), info)
        first = env.step("hello")
        assert first == (
            ({"role": "user", "content": "hello"},),
            0.5,
            False,
            False,
            {"observation": {"echoed_message": "hello"}},
        )
        assert env.step("bye")[2] is True  # done: terminated
        env.close()


def test_sessions_in_worker_processes_end_with_the_session() -> None:
    """``--workers process``: each session's env in a child process (a forkserver's), which
    goes when the session does."""
    import psutil

    served = start_server("agentgym/FrozenLake-v0", num_envs=2, args=["--workers", "process"])
    try:
        server_process = psutil.Process(served.process.pid)

        def workers() -> set[int]:
            children = server_process.children(recursive=True)
            return {c.pid for c in children if c.status() != psutil.STATUS_ZOMBIE}

        before = workers()  # the forkserver, started by the startup check
        env = RemoteEnv(url=served.url)
        local = gym.make("agentgym/FrozenLake-v0")
        assert env.reset(seed=5) == local.reset(seed=5)
        assert env.step("```right```")[:3] == local.step("```right```")[:3]
        assert len(workers() - before) == 1
        env.close()
        wait_for(lambda: not workers() - before, "the session's worker process gone")
    finally:
        served.close()


def test_a_refusal_sent_before_the_request_is_read() -> None:
    """OpenEnv refuses a session at capacity with an error and a close sent on connect; whether
    they arrive before or after the client's reset, the reason reaches the episode's info."""

    async def refuse(ws: ServerConnection) -> None:
        error = {"code": "CAPACITY_REACHED", "message": "Server at capacity (1/1 sessions)"}
        await ws.send(json.dumps({"type": "error", "data": error}))
        await ws.close()

    async def play() -> list[Any]:
        async with serve(refuse, "127.0.0.1", 0) as ws_server:
            port = next(iter(ws_server.sockets)).getsockname()[1]
            env = RemoteEnv(url=f"ws://127.0.0.1:{port}")
            infos = []
            for seed in range(20):  # both orders of the close and the request occur
                if seed % 2:
                    await asyncio.sleep(0.01)  # let the refusal arrive first, sometimes
                infos.append((await env.areset(seed=seed))[1])
            await env.aclose()
            return infos

    for info in asyncio.run(play()):
        assert info["infra_error"] is True
        assert "refused a session" in info["error"], info
