"""``RemoteEnv`` (``agentgym/Remote-v0``): play an env that another process or machine serves.

Moved here from ``agentgym.envs.remote`` (the client is a ``ProxyEnv``, which lives in
``agentgym.vector``); ``start_server``, ``server_status`` and ``LocalServer`` are re-exported
from ``agentgym.vector.launch``.
"""

from __future__ import annotations

import atexit
import json
import threading
from typing import Any, Literal

from agentgym.core.errors import ConfigError
from agentgym.core.jsonsafe import json_safe
from agentgym.envs.validate import choice, seconds
from agentgym.extras import pip_install
from agentgym.vector.launch import LocalServer, server_status, start_server
from agentgym.vector.proxy import ProxyEnv, RemoteEnvError
from agentgym.vector.transports.openenv import OpenEnvTransport

__all__ = [
    "DEFAULT_ENV_ID",
    "LocalServer",
    "RemoteEnv",
    "RemoteEnvError",
    "server_status",
    "start_server",
]

DEFAULT_ENV_ID = "agentgym/FrozenLake-v0"
LOCAL_SESSIONS = 256
INSTALL = pip_install("openenv")

_LOCAL: dict[str, LocalServer] = {}
_LOCAL_LOCK = threading.Lock()


def _local_server(env_id: str, env_kwargs: dict[str, Any]) -> LocalServer:
    """The server of ``env_id`` this process started, shared by its Remote-v0 envs."""
    key = json.dumps([env_id, json_safe(env_kwargs)], sort_keys=True)
    with _LOCAL_LOCK:
        server = _LOCAL.get(key)
        if server is None or server.process.poll() is not None:
            server = start_server(env_id, num_envs=LOCAL_SESSIONS, env_kwargs=env_kwargs)
            _LOCAL[key] = server
        return server


@atexit.register
def _stop_local_servers() -> None:
    with _LOCAL_LOCK:
        for server in _LOCAL.values():
            server.close()
        _LOCAL.clear()


class RemoteEnv(ProxyEnv):
    """An env served by ``agentgym serve-env`` (or any OpenEnv server), played over WebSocket.

    Description:
        Browsers and containers can live on other machines than the trainer: ``agentgym
        serve-env ENV_ID`` serves a registered env over OpenEnv's protocol
        (``agentgym.vector.serve_env``), and this env plays it, one server session per episode
        by default. With ``url=None`` the env starts such a server for ``env_id`` itself, in a
        child process on a free loopback port, shared by every Remote-v0 of this process with
        the same ``env_id`` and ``env_kwargs`` and stopped when the process exits.
        ``reset(seed=s)`` plays what the served env plays for ``s``; a ``reset()`` without a
        seed sends one drawn from this env's generator (with ``session="episode"``), so
        ``reset(seed=s)`` followed by ``reset()`` repeats too. A ``ProxyEnv`` over an
        ``OpenEnvTransport`` (``agentgym.vector.transports.openenv``), which speaks the
        protocol with ``websockets`` directly.

    Observation:
        What the served env returns: its chat messages, unchanged. Infos cross as JSON: a
        tuple arrives as a list, a numpy number as a Python one, a non-finite float as None.
        From an OpenEnv server that is not agentgym's, the observation becomes one user message
        (its one text field, else its JSON) and the raw observation is ``info["observation"]``.

    Action:
        The model's text or an assistant message dict, sent as ``{"message": action}`` (the
        field OpenEnv's text envs read).

    Tools:
        The served env's, declared in ``info["tools"]`` on reset (``[]`` from a foreign
        server); the action space names none, so its samples are plain text.

    Reward:
        The served env's reward, unchanged.

    Episode end:
        As the served env's, including its step limit. A server that cannot be reached, refuses
        a session (at capacity), drops the connection or misses a deadline gives that episode
        ``info["infra_error"]`` True: a failed reset returns ``()`` with it (its ``error`` says
        why) and the next step ends the episode truncated with it; a failed step ends the
        episode truncated (``truncation_reason == "infra_error"``). The next reset connects
        afresh. An exception in the served env raises ``RemoteEnvError`` (``EnvStateError`` for
        out-of-order calls). Stepping an ended episode raises ``EnvStateError``.

    Sandbox: what is isolated and what is not:
        Whatever the served env isolates, on the server's machine. The connection is plain
        WebSocket without authentication: serve on loopback or a private network.

    Arguments:
        url: the server (``http://host:port`` or ``ws://host:port/ws``); ``None`` starts one.
        env_id: the env to serve when ``url`` is None (default ``agentgym/FrozenLake-v0``);
            with a ``url``, checked against the server's ``/status`` when it has one.
        env_kwargs: constructor arguments of the served env (only without ``url``).
        session: ``"episode"`` (a fresh server session, hence a fresh env, every reset) or
            ``"env"`` (one session for as long as it works).
        connect_timeout: seconds to open a connection. reset_timeout, step_timeout: seconds a
            reset (connecting included) or step may take, beyond the server's own deadlines.
        max_message_mb: largest message accepted from the server.
        render_mode: ``"ansi"`` / ``"human"``.

    Reset info keys: ``tools``, ``infra_error`` and ``error`` when the reset failed, and the
    served env's (see its docstring; FrozenLake-v0's by default: ``task_id``, ``map``,
    ``size``, ``max_turns``, ``state``, ``action_choices``); ``observation`` from a foreign
    server.
    Step info keys: the served env's (FrozenLake-v0's by default: ``success``,
    ``invalid_action``, ``reward_components``, ``position``, ``turn``, ``task_id``, ``state``,
    ``action_choices``, ``truncation_reason``); ``observation`` from a foreign server.

    Version history:
        v0: first version.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        env_id: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        session: Literal["episode", "env"] = "episode",
        connect_timeout: float = 30.0,
        reset_timeout: float = 180.0,
        step_timeout: float = 360.0,
        max_message_mb: float = 100.0,
        render_mode: str | None = None,
    ) -> None:
        try:
            import websockets  # noqa: F401
        except ImportError as e:
            raise ImportError(f"Remote-v0 needs the websockets package. Fix: {INSTALL}") from e
        choice("session", session, ("episode", "env"))
        self.session = session
        self.connect_timeout = seconds("connect_timeout", connect_timeout)
        self.max_message_bytes = int(seconds("max_message_mb", max_message_mb) * 2**20)
        timeouts = seconds("reset_timeout", reset_timeout), seconds("step_timeout", step_timeout)
        self.env_id: str | None
        if url is None:
            self.env_id = env_id or DEFAULT_ENV_ID
            self.url = _local_server(self.env_id, dict(env_kwargs or {})).url
        else:
            if env_kwargs:
                fix = "pass them to `agentgym serve-env --env-kwargs`, or drop url"
                raise ConfigError("env_kwargs", env_kwargs, "are the server's with a url", fix)
            self.env_id, self.url = env_id, url
            self._check_served(url, env_id)
        transport = OpenEnvTransport(
            self.url,
            connect_timeout=self.connect_timeout,
            max_message_bytes=self.max_message_bytes,
        )
        super().__init__(
            transport,
            description={},  # the server describes nothing: connect at the first reset
            fresh_env_per_reset=session == "episode",
            reset_timeout=timeouts[0],
            step_timeout=timeouts[1],
            close_timeout=self.connect_timeout,
            render_mode=render_mode,
        )

    def _check_served(self, url: str, env_id: str | None) -> None:
        if not url.startswith(("http://", "https://", "ws://", "wss://")):
            fix = "url='http://host:8000'"
            raise ConfigError("url", url, "is not an http(s):// or ws(s):// URL", fix)
        if env_id is None:
            return
        try:
            status = server_status(url, self.connect_timeout)
        except OSError:  # not up (yet): each episode's infra_error tells
            return
        served = (status or {}).get("env_id", env_id)
        if served != env_id:
            fix = f"pass env_id={served!r}, or the URL of a server of {env_id}"
            raise ConfigError("env_id", env_id, f"the server at {url} serves {served!r}", fix)
