"""The wire format of an agentgym env served over OpenEnv's protocol, shared by both ends.

OpenEnv (``openenv-core``) serves an env at ``ws://host:port/ws``: one WebSocket connection is one
session with an env instance of its own. The client sends ``{"type": "reset", "data": {...}}``,
``{"type": "step", "data": <action>}``, ``{"type": "state"}`` or ``{"type": "close"}``; the server
answers ``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}``,
``{"type": "state", "data": {...}}`` or ``{"type": "error", "data": {"message", "code"}}``.

What agentgym puts in those envelopes (``agentgym.vector.serve_env`` sends,
``agentgym.vector.transports.openenv`` reads):

- action (the step's ``data``): ``{"message": <the model's text or an assistant message dict>}``,
  the field name OpenEnv's text envs (echo, TextArena) use;
- observation: ``{"messages": [...], "info": {...}, "terminated": bool, "truncated": bool}``,
  the new chat messages and the info of ``reset``/``step``, JSON-safe; ``done`` is
  ``terminated or truncated`` and ``reward`` the step's reward.

OpenEnv's serializer drops an observation's ``metadata``, so the info travels as its own field.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACTION_FIELD",
    "CAPACITY_REACHED",
    "READY_PREFIX",
    "STATUS_PATH",
    "WS_PATH",
    "http_url",
    "ws_url",
]

WS_PATH: Final = "/ws"
STATUS_PATH: Final = "/status"
"""agentgym's addition to OpenEnv's routes: ``{"env_id", "active_sessions", "max_sessions"}``."""
ACTION_FIELD: Final = "message"
CAPACITY_REACHED: Final = "CAPACITY_REACHED"
READY_PREFIX: Final = "agentgym serve-env: serving"
"""``agentgym serve-env`` prints one line starting with this, ending with its URL, once it
listens (``--port 0`` picks a free port: read it there)."""


def ws_url(url: str) -> str:
    """``ws://host:port/ws`` for a server's base URL (``http``, ``https``, ``ws`` or ``wss``)."""
    base = url.rstrip("/")
    for scheme, ws in (("https://", "wss://"), ("http://", "ws://")):
        if base.startswith(scheme):
            base = ws + base[len(scheme) :]
    if base.endswith(WS_PATH):
        return base
    return base + WS_PATH


def http_url(url: str) -> str:
    """``http://host:port`` for a server's base URL (the inverse of ``ws_url``)."""
    base = url.rstrip("/")
    if base.endswith(WS_PATH):
        base = base[: -len(WS_PATH)]
    for scheme, http in (("wss://", "https://"), ("ws://", "http://")):
        if base.startswith(scheme):
            base = http + base[len(scheme) :]
    return base
